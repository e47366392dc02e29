/* version.c - btr_version() (btr/version.h). */
#include "btr/version.h"

const char *btr_version(void)
{
	return BTR_VERSION_STRING;
}
