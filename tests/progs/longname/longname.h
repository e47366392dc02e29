/* longname.h - exported functions whose names have 128, 200, 1000 and
 * 4096 characters (asm labels built from string literals), called through
 * the PLT and through GOT slots (-fno-plt) by tests/cli_check.sh: btr
 * check gave got-overwrite for names of 128 characters or more (it copied
 * the name into a 128-byte buffer) and skipped PLT jumps of such names. */
#ifndef LONGNAME_H
#define LONGNAME_H
#define LN_S8 "abcdefgh"
#define LN_S64 LN_S8 LN_S8 LN_S8 LN_S8 LN_S8 LN_S8 LN_S8 LN_S8
#define LN_S512 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64
/* "ln" + ... = exactly N characters */
#define LN_128 "ln" LN_S64 "abcdefghabcdefghabcdefghabcdefghabcdefghabcdefghabcdefghabcdef"
#define LN_200 "ln" LN_S64 LN_S64 LN_S64 "abcdef"
#define LN_1000 "ln" LN_S512 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 \
	"abcdefghabcdefghabcdefghabcdefghabcdef"
#define LN_4096 "ln" LN_S512 LN_S512 LN_S512 LN_S512 LN_S512 LN_S512 LN_S512 \
	LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 LN_S64 "abcdefghabcdefghabcdefghabcdefghabcdefghabcdefghabcdefghabcdef"

int ln128(int x) __asm__(LN_128);
int ln200(int x) __asm__(LN_200);
int ln1000(int x) __asm__(LN_1000);
int ln4096(int x) __asm__(LN_4096);
#endif
