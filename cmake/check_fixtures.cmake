# check_fixtures.cmake - the LD_PRELOAD fixture of `btr check`
# (tests/cli_check.sh): libcheck_hide.so hides directory entries named
# btr_hidden* from readdir().  A shared object, so it cannot live in
# tests/progs/ (every .c there becomes an executable).
add_library(check_hide SHARED ${CMAKE_CURRENT_SOURCE_DIR}/tests/progs/preload/check_hide.c)
set_target_properties(check_hide PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_options(check_hide PRIVATE -g -O1 -Wno-error -fno-sanitize=all)
target_link_options(check_hide PRIVATE -fno-sanitize=all)
target_link_libraries(check_hide PRIVATE ${CMAKE_DL_LIBS})

# Names of 128 to 4,096 characters through the PLT and GOT slots
# (tests/progs/longname/): libcheck_longname.so exports them, two programs
# call them, through the PLT and with -fno-plt.
add_library(check_longname SHARED ${CMAKE_CURRENT_SOURCE_DIR}/tests/progs/longname/lib.c)
set_target_properties(check_longname PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_compile_options(check_longname PRIVATE -g -O1 -Wno-error -fno-sanitize=all)
target_link_options(check_longname PRIVATE -fno-sanitize=all)
foreach(v plt noplt)
  set(t prog_benign_longname_${v})
  add_executable(${t} ${CMAKE_CURRENT_SOURCE_DIR}/tests/progs/longname/call.c)
  target_compile_options(${t} PRIVATE -g -O1 -Wno-error -fno-sanitize=all)
  target_link_options(${t} PRIVATE -fno-sanitize=all)
  target_link_libraries(${t} PRIVATE check_longname)
endforeach()
target_compile_options(prog_benign_longname_noplt PRIVATE -fno-plt)

# IFUNC (IRELATIVE) slots (tests/progs/ifunc/): libm's log1p called
# directly, from a static-pie program, and through dlopen of libm; and the
# attack, an overwritten IRELATIVE slot of the program's own IFUNC.
set(BTR_IFUNC_DIR ${CMAKE_CURRENT_SOURCE_DIR}/tests/progs/ifunc)
foreach(t prog_benign_ifunc prog_benign_ifunc_static prog_benign_ifunc_dl)
  add_executable(${t} ${BTR_IFUNC_DIR}/log1p.c)
  target_compile_options(${t} PRIVATE -g -O1 -fno-inline -Wno-error -fno-sanitize=all)
  target_link_options(${t} PRIVATE -fno-sanitize=all)
endforeach()
target_link_libraries(prog_benign_ifunc PRIVATE m)
target_compile_options(prog_benign_ifunc_static PRIVATE -fPIE)
target_link_options(prog_benign_ifunc_static PRIVATE -static-pie)
target_link_libraries(prog_benign_ifunc_static PRIVATE m)
target_compile_definitions(prog_benign_ifunc_dl PRIVATE VIA_DLOPEN)
target_link_libraries(prog_benign_ifunc_dl PRIVATE ${CMAKE_DL_LIBS})
add_executable(prog_check_ifunc ${BTR_IFUNC_DIR}/check_ifunc.c)
target_compile_options(prog_check_ifunc PRIVATE -g -O1 -fno-inline -Wno-error -fno-sanitize=all)
target_link_options(prog_check_ifunc PRIVATE -fno-sanitize=all)
