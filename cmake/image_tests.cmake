# image_tests.cmake - extra test program for tests/test_image.c: the same
# source as prog_symbols, linked as a non-PIE ET_EXEC so that both the
# load-bias (PIE) and the fixed-address (ET_EXEC) paths of lib/image/image.c are
# tested against a real binary.
add_executable(prog_symbols_nopie ${CMAKE_CURRENT_SOURCE_DIR}/tests/progs/symbols.c)
set_target_properties(prog_symbols_nopie PROPERTIES POSITION_INDEPENDENT_CODE OFF)
target_compile_options(prog_symbols_nopie PRIVATE -g -O1 -fno-inline -fno-pie -Wno-error -fno-sanitize=all)
target_link_options(prog_symbols_nopie PRIVATE -no-pie -fno-sanitize=all)
