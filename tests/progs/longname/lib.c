/* lib.c - libcheck_longname.so: the exported functions of longname.h. */
#include "longname.h"

int ln128(int x) { return x + 1; }
int ln200(int x) { return x + 2; }
int ln1000(int x) { return x + 3; }
int ln4096(int x) { return x + 4; }
