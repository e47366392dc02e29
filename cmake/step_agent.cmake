# step_agent.cmake - the in-process agent of `btr record -b step --inproc`
# (btr-step-agent.so, next to the btr binary where btr looks for it).
# lib/capture/step_agent.c is also globbed into libbtr, where it compiles
# to nothing: only this target defines BTR_STEP_AGENT_BUILD.
add_library(btr-step-agent MODULE lib/capture/step_agent.c)
set_target_properties(btr-step-agent PROPERTIES PREFIX "" OUTPUT_NAME btr-step-agent
  C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_definitions(btr-step-agent PRIVATE _GNU_SOURCE BTR_STEP_AGENT_BUILD)
# The trap handler runs once per instruction: optimized in every build, and
# loaded into uninstrumented programs (no sanitizers).
target_compile_options(btr-step-agent PRIVATE -O2 -fno-sanitize=all)
target_link_options(btr-step-agent PRIVATE -fno-sanitize=all)
target_link_libraries(btr-step-agent PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(btr-cli btr-step-agent)
install(TARGETS btr-step-agent LIBRARY DESTINATION lib/btr)   # where btr looks for it (cmake/install.cmake)
