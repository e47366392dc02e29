# sys_count.cmake - the whole-system tests' independent instruction counter,
# a QEMU TCG plugin for qemu-system-x86_64 (tests/tools/sys_count.c) that
# shares no code with btr's system plugin.
add_library(btr-sys-count MODULE tests/tools/sys_count.c)
set_target_properties(btr-sys-count PROPERTIES PREFIX "" OUTPUT_NAME btr-sys-count
  C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_options(btr-sys-count PRIVATE -O2)
target_include_directories(btr-sys-count PRIVATE agents/qemu)
if(BTR_SANITIZE)
  target_compile_options(btr-sys-count PRIVATE -fno-sanitize=all)
  target_link_options(btr-sys-count PRIVATE -fno-sanitize=all)
endif()
add_dependencies(btr-cli btr-sys-count)
