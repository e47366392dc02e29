# dl_fixtures.cmake - the libraries tests/progs/qemu_dlclose.c loads and
# unloads at run time (tests/cli_dlclose.sh).  Shared objects, so they
# cannot live in tests/progs/ (every .c there becomes an executable).
foreach(name dl_loop dl_other)
  add_library(btr_${name} SHARED ${CMAKE_CURRENT_SOURCE_DIR}/tests/progs/dl/${name}.c)
  set_target_properties(btr_${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  target_compile_options(btr_${name} PRIVATE -g -Wno-error -fno-sanitize=all)
  target_link_options(btr_${name} PRIVATE -fno-sanitize=all)
endforeach()
