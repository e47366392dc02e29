#include <errno.h>
#include <limits.h>
#include "check.h"
#include "btr/error.h"

static int logged __attribute__((unused));
static enum btr_log_level last_level;
static void logfn(void *ctx, enum btr_log_level level, const char *msg)
{
	(void)msg;
	(*(int *)ctx)++;
	last_level = level;
}

int main(void)
{
	CHECK_STR(btr_errstr(0), "success");
	CHECK_STR(btr_errstr(-BTR_ERR_CHECKSUM), "checksum mismatch");
	CHECK_STR(btr_errstr(BTR_ERR_CHECKSUM), "checksum mismatch");
	CHECK_STR(btr_errstr(-9999), "unknown error");
	/* total: every int has a string (INT_MIN has no positive counterpart) */
	CHECK_STR(btr_errstr(INT_MIN), "unknown error");
	CHECK_STR(btr_errstr(INT_MIN + 1), "unknown error");
	CHECK_STR(btr_errstr(INT_MAX), "unknown error");
	CHECK_STR(btr_errstr(9999), "unknown error");
	CHECK_STR(btr_errstr(BTR_ERR__COUNT), "unknown error");
	CHECK_STR(btr_errstr(-BTR_ERR__COUNT), "unknown error");
	for (int e = 0; e < BTR_ERR__COUNT; e++)
		CHECK(strcmp(btr_errstr(-e), "unknown error") != 0);
	CHECK_EQ(btr_err_from_errno(ENOENT), -BTR_ERR_NOENT);
	CHECK_EQ(btr_err_from_errno(EACCES), -BTR_ERR_PERM);
	CHECK_EQ(btr_err_from_errno(EIO), -BTR_ERR_IO);
	btr_log_set(logfn, &logged, BTR_LOG_WARN);
	(void)last_level;
	return check_done();
}
