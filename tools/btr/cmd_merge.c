/* cmd_merge.c - `btr merge A B ... -o OUT`: profiles of many runs or
 * machines merged into one (docs/merge.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_prof.h"

static const struct cli_opt opts[] = {
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       the merged profile ('-': stdout)\n" CLI_OUTPUT_HELP, "missing -o OUT" },
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"merge",
	"Usage: btr merge [OPTIONS] PROFILE... -o OUT\n"
	"Merge profiles of many traces or machines into one: counts of the same\n"
	"branch, stack or location add up.  All inputs must be of one kind:\n"
	"  BOLT fdata (btr bolt, perf2bolt), BOLT pre-aggregated (btr bolt\n"
	"  --pre-aggregated), pprof (btr pprof; modules matched by build-id), folded\n"
	"  stacks (btr flame), LLVM sample profiles (btr afdo; text format).\n"
	"The result does not depend on the order or grouping of the inputs, so\n"
	"merges can run as a tree: merge(merge(A,B),C) = merge(A,B,C).  An empty\n"
	"input adds nothing (it mixes with any kind; all empty: an empty result).\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 an input cannot be read or is not a\n"
	"profile of the same kind (nothing is written then).\n",
	1, -1, "missing input profiles", NULL,
};


static int read_all(const char *path, uint8_t **data, size_t *size)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return -EISDIR;
	}
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	while (buf) {
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (n < cap)
			break;
		uint8_t *nb = realloc(buf, cap *= 2);
		if (!nb) {
			free(buf);
			buf = NULL;
		}
		buf = nb;
	}
	int err = ferror(f) ? EIO : 0;
	fclose(f);
	if (!buf)
		return -ENOMEM;
	if (err) {
		free(buf);
		return -err;
	}
	*data = buf;
	*size = n;
	return 0;
}

/* The library's last message, put into our one line about the input. */
/* An input of nothing but newlines and spaces (an empty profile: a
 * trace's flame of no stacks, an fdata of no branches). */
static int blank(const uint8_t *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (d[i] != '\n' && d[i] != ' ')
			return 0;
	return 1;
}

static char last_msg[256];
static void keep_msg(void *ctx, enum btr_log_level level, const char *msg)
{
	if (level <= BTR_LOG_ERROR)
		snprintf(last_msg, sizeof(last_msg), "%s", msg);
}

static int on_opt(void *ctx, int key, char *arg)
{
	if (key == 'o')
		*(const char **)ctx = arg;
	return EXIT_OK;
}

int cmd_merge(int argc, char **argv)
{
	const char *outp = NULL;
	int first;
	int prc = cli_cmd_parse(&cmd, argc, argv, NULL, on_opt, &outp, &first);
	if (prc != EXIT_OK)
		return prc == CLI_CMD_DONE ? EXIT_OK : prc;
	struct cli_output out;
	int orc = cli_output_check(&out, "merge", outp, 0);
	if (orc != EXIT_OK)
		return orc;
	struct btr_merge *m = NULL;
	enum btr_merge_kind kind = BTR_MERGE_UNKNOWN;
	for (int i = first; i < argc; i++) {
		uint8_t *data = NULL;
		size_t size = 0;
		int rc = read_all(argv[i], &data, &size);
		if (rc) {
			cli_error("%s: %s", argv[i], strerror(-rc));
			btr_merge_free(m);
			return EXIT_RUNTIME;
		}
		if (!m && blank(data, size)) {
			/* an empty profile adds nothing: the kind is the
			 * first non-empty input's */
			free(data);
			continue;
		}
		if (!m) {
			enum btr_merge_kind k = kind = btr_merge_detect(data, size);
			if (k == BTR_MERGE_UNKNOWN || btr_merge_new(k, &m)) {
				cli_error("%s: not a profile btr merges (fdata, pre-aggregated, pprof, folded, sample profile)", argv[i]);
				free(data);
				return EXIT_RUNTIME;
			}
		}
		last_msg[0] = 0;
		btr_log_set(keep_msg, NULL, BTR_LOG_ERROR);
		rc = btr_merge_add(m, data, size);
		free(data);
		if (rc) {
			cli_error("%s: %s", argv[i],
				  last_msg[0] ? last_msg : rc == -BTR_ERR_BAD_FORMAT ? "not a profile of the same kind as the first input" : btr_errstr(rc));
			btr_merge_free(m);
			return EXIT_RUNTIME;
		}
	}
	/* pprof profiles are gzipped protobuf: not for a terminal */
	if (kind == BTR_MERGE_PPROF && (orc = cli_output_refuse_tty(&out, "merge", "a pprof profile"))) {
		btr_merge_free(m);
		return orc;
	}
	FILE *f = cli_output_open(&out);
	if (!f) {
		btr_merge_free(m);
		cli_output_discard(&out);
		return EXIT_RUNTIME;
	}
	errno = 0;
	int wr = m ? btr_merge_write(m, f) : 0;   /* every input empty: so is the merge */
	int e = errno;
	btr_merge_free(m);
	if (wr)
		cli_output_failed(&out, wr, e);
	if (cli_output_close(&out, wr == 0) || wr)
		return EXIT_RUNTIME;
	return EXIT_OK;
}
