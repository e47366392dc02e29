/* btr/version.h - the library's version: the macros for compile time, and
 * btr_version() for the library a program runs with.  CMakeLists.txt reads
 * its project version from these macros (one place). */
#ifndef BTR_VERSION_H
#define BTR_VERSION_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#define BTR_VERSION_MAJOR 0
#define BTR_VERSION_MINOR 1
#define BTR_VERSION_PATCH 0
/* "MAJOR.MINOR.PATCH" */
#define BTR_VERSION_STRING "0.1.0"
/* A number that grows with each release: 10000 * MAJOR + 100 * MINOR + PATCH. */
#define BTR_VERSION_NUMBER (10000 * BTR_VERSION_MAJOR + 100 * BTR_VERSION_MINOR + BTR_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library in use, "MAJOR.MINOR.PATCH" (a static
 * string): compare it with BTR_VERSION_STRING to see whether a program
 * runs with the libbtr it was built against. */
const char *btr_version(void);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif
