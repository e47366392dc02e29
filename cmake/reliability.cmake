# Reliability harnesses (docs/reliability.md).
#
# Fuzz-target replays: every tests/fuzz/fuzz_NAME.c is also linked with
# tests/fuzz/replay.c into replay_NAME, and CTest runs it over the kept
# findings (tests/fuzz/regress/NAME/) and the seed corpus
# (tests/fuzz/corpus/NAME/, never empty: replay fails on no input) - in the plain build and, through `make asan`,
# under ASan + UBSan.  (The libFuzzer build itself is BTR_FUZZ.)
enable_testing()
if(NOT BTR_FUZZ)
  file(GLOB BTR_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
  foreach(src ${BTR_FUZZ_SOURCES})
    get_filename_component(fname ${src} NAME_WE)
    string(REGEX REPLACE "^fuzz_" "" short ${fname})
    add_executable(replay_${short} ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay.c)
    target_include_directories(replay_${short} PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/lib)
    target_compile_definitions(replay_${short} PRIVATE _GNU_SOURCE)
    target_link_libraries(replay_${short} PRIVATE btr)
    add_test(NAME fuzz_regress_${short}
      COMMAND replay_${short} ${CMAKE_SOURCE_DIR}/tests/fuzz/regress/${short} ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${short})
    set_tests_properties(fuzz_regress_${short} PROPERTIES TIMEOUT 300)
  endforeach()
endif()

# Allocation-failure torture: the CLI once more, with every allocation call
# of lib/ and tools/btr/ going through tests/torture/alloc_shim.c
# (BTR_ALLOC_FAIL=N fails the N-th).  Only this test binary is wrapped.
file(GLOB BTR_TORTURE_CLI_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/btr/*.c)
add_executable(btr_torture ${BTR_TORTURE_CLI_SOURCES} ${CMAKE_SOURCE_DIR}/tests/torture/alloc_shim.c)
target_compile_definitions(btr_torture PRIVATE _GNU_SOURCE)
target_link_libraries(btr_torture PRIVATE btr)
target_link_options(btr_torture PRIVATE
  -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=strdup,--wrap=aligned_alloc,--wrap=asprintf)
