# qemu_plugin.cmake - the QEMU TCG plugin (btr-qemu.so, next to the btr
# binary, where `btr record -b qemu` looks for it) and the demo program.
#
# lib/capture/qemu_plugin.c is also globbed into libbtr, where it compiles
# to nothing: only this target defines BTR_QEMU_PLUGIN_BUILD.
add_library(btr-qemu MODULE lib/capture/qemu_plugin.c)
set_target_properties(btr-qemu PROPERTIES PREFIX "" OUTPUT_NAME btr-qemu
  C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_definitions(btr-qemu PRIVATE _GNU_SOURCE BTR_QEMU_PLUGIN_BUILD)
# The callbacks run once per executed TB: optimize them even in Debug builds.
target_compile_options(btr-qemu PRIVATE -O2)
target_include_directories(btr-qemu PRIVATE lib lib/capture)
# The plugin's symbols (qemu_plugin_*) are resolved against qemu-x86_64
# at dlopen time; libbtr (PIC) is linked in statically.
if(BTR_SANITIZE)
  # An ASan-instrumented object cannot be loaded into the uninstrumented
  # qemu-x86_64 ("ASan runtime does not come first"): build the plugin
  # from an uninstrumented copy of the library sources.
  target_sources(btr-qemu PRIVATE ${BTR_LIB_SOURCES})
  target_include_directories(btr-qemu PRIVATE include)
  target_compile_options(btr-qemu PRIVATE -fno-sanitize=all)
  target_link_options(btr-qemu PRIVATE -fno-sanitize=all)
  target_link_libraries(btr-qemu PRIVATE PkgConfig::ZSTD PkgConfig::DW PkgConfig::ELF PkgConfig::ZLIB ${ZYDIS_LIB} Threads::Threads stdc++ m)
  if(ZYCORE_LIB)
    target_link_libraries(btr-qemu PRIVATE ${ZYCORE_LIB})
  endif()
else()
  target_link_libraries(btr-qemu PRIVATE btr)
endif()
# Only the library code the plugin calls, and only the shared libraries
# that code needs: every traced process loads the plugin, and libdw, libelf
# and libstdc++ (symbolization) cost it about 1 ms of dynamic linking.
target_link_options(btr-qemu PRIVATE -Wl,--exclude-libs,ALL -Wl,--gc-sections -Wl,--as-needed)
add_dependencies(btr-cli btr-qemu)

# make demo: a small program with loops, recursion and indirect calls.
add_executable(example_demo examples/demo.c)
target_compile_options(example_demo PRIVATE -g -O1)
if(BTR_SANITIZE)
  # It runs under QEMU, where an ASan binary's shadow reservation exhausts memory.
  target_compile_options(example_demo PRIVATE -fno-sanitize=all)
  target_link_options(example_demo PRIVATE -fno-sanitize=all)
endif()
set_target_properties(example_demo PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
install(TARGETS btr-qemu LIBRARY DESTINATION lib/btr)   # where btr looks for it (cmake/install.cmake)
