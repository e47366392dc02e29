# install.cmake - `make install PREFIX=...` (cmake --install BUILD --prefix
# PREFIX): the libraries, headers, the CLI, its QEMU plugin and step agent,
# btr.pc and the docs (docs/library.md).
#
#   PREFIX/bin/btr                      (RPATH $ORIGIN/../lib)
#   PREFIX/lib/libbtr.so.MAJOR, libbtr.so, libbtr.a
#   PREFIX/lib/btr/btr-qemu.so, btr-step-agent.so   (where btr looks for them;
#                                    installed by agents/qemu, agents/step)
#   PREFIX/lib/pkgconfig/btr.pc, btr-static.pc (libbtr.a, the rest shared)
#   PREFIX/include/btr/*.h
#   PREFIX/share/doc/btr/*.md
set(BTR_PC_PRIVATE "-lZydis")
if(ZYCORE_LIB)
  string(APPEND BTR_PC_PRIVATE " -lZycore")
endif()
string(APPEND BTR_PC_PRIVATE " -lstdc++ -lm -lpthread")
configure_file(${CMAKE_SOURCE_DIR}/cmake/btr.pc.in ${CMAKE_BINARY_DIR}/btr.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/btr-static.pc.in ${CMAKE_BINARY_DIR}/btr-static.pc @ONLY)

install(TARGETS btr_shared LIBRARY DESTINATION lib)
install(FILES ${BTR_STATIC_LIB} DESTINATION lib)   # libbtr.a: internal symbols local (CMakeLists.txt)
install(TARGETS btr-cli RUNTIME DESTINATION bin)
install(DIRECTORY include/btr DESTINATION include)
install(FILES ${CMAKE_BINARY_DIR}/btr.pc ${CMAKE_BINARY_DIR}/btr-static.pc DESTINATION lib/pkgconfig)
install(DIRECTORY docs/ DESTINATION share/doc/btr FILES_MATCHING PATTERN "*.md")
