# python.cmake - the Python package btr (python/btr, docs/python.md), installed
# by `make install PREFIX=...` as PREFIX/lib/python3/dist-packages/btr (Debian's
# layout: /usr/lib/python3/dist-packages is on Debian's python3 path; for another
# prefix, put PREFIX/lib/python3/dist-packages on PYTHONPATH).  The package loads
# PREFIX/lib/libbtr.so.0, found relative to itself or through _install.py, which
# names the lib directory of the prefix it was installed into.
install(DIRECTORY python/btr DESTINATION lib/python3/dist-packages
  FILES_MATCHING PATTERN "*.py" PATTERN "py.typed" PATTERN "__pycache__" EXCLUDE)
install(CODE "
  file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/python3/dist-packages/btr/_install.py\"
    \"# written by make install: where this prefix's libbtr.so.0 is\\nLIBDIR = \\\"\${CMAKE_INSTALL_PREFIX}/lib\\\"\\n\")
")
