# insn_count.cmake - the tests' independent instruction counter, a QEMU TCG
# plugin (tests/tools/insn_count.c) that shares no code with btr's plugin.
add_library(btr-insn-count MODULE tests/tools/insn_count.c)
set_target_properties(btr-insn-count PROPERTIES PREFIX "" OUTPUT_NAME btr-insn-count
  C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_definitions(btr-insn-count PRIVATE _GNU_SOURCE)
target_compile_options(btr-insn-count PRIVATE -O2)
target_include_directories(btr-insn-count PRIVATE agents/qemu)
if(BTR_SANITIZE)
  # loaded into the uninstrumented qemu-x86_64
  target_compile_options(btr-insn-count PRIVATE -fno-sanitize=all)
  target_link_options(btr-insn-count PRIVATE -fno-sanitize=all)
endif()
add_dependencies(btr-cli btr-insn-count)
