# demo.cmake - `make demo`'s program (examples/demo.c): loops, recursion and
# indirect calls, recorded under QEMU with the plugin (agents/qemu).
add_executable(example_demo examples/demo.c)
target_compile_options(example_demo PRIVATE -g -O1)
if(BTR_SANITIZE)
  # It runs under QEMU, where an ASan binary's shadow reservation exhausts memory.
  target_compile_options(example_demo PRIVATE -fno-sanitize=all)
  target_link_options(example_demo PRIVATE -fno-sanitize=all)
endif()
set_target_properties(example_demo PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
