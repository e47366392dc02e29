"""The version of this package (the project's: include/btr/version.h; tests/cli_python.sh checks)."""
__version__ = "0.1.0"
