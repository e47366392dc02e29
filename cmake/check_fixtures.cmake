# check_fixtures.cmake - the LD_PRELOAD fixture of `btr check`
# (tests/cli_check.sh): libcheck_hide.so hides directory entries named
# btr_hidden* from readdir().  A shared object, so it cannot live in
# tests/progs/ (every .c there becomes an executable).
add_library(check_hide SHARED ${CMAKE_CURRENT_SOURCE_DIR}/tests/progs/preload/check_hide.c)
set_target_properties(check_hide PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_options(check_hide PRIVATE -g -O1 -Wno-error -fno-sanitize=all)
target_link_options(check_hide PRIVATE -fno-sanitize=all)
target_link_libraries(check_hide PRIVATE ${CMAKE_DL_LIBS})
