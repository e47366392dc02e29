/* cli_stream.c - the trace-reading options every command shares (cli.h). */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_stream_init(struct cli_stream *cs)
{
	memset(cs, 0, sizeof(*cs));
	cs->so.sz = sizeof(cs->so);
}

/* FILE[:BASE]: the part after the last ':' is a base only if it parses
 * as a number, so paths containing ':' still work. */
static int parse_elf(char *arg, struct btr_stream_elf *e)
{
	memset(e, 0, sizeof(*e));
	e->path = arg;
	char *c = strrchr(arg, ':');
	if (c == arg)
		return -1;   /* ":BASE" without a file */
	if (c) {
		uint64_t v;
		if (cli_parse_u64(c + 1, &v) == 0) {
			*c = 0;
			e->base = v;
			e->has_base = 1;
		} else if (c[1] == 0 || (c[1] >= '0' && c[1] <= '9')) {
			return -1;
		}
	}
	return arg[0] ? 0 : -1;
}

static int parse_id(const char *cmd, const char *what, const char *arg, uint32_t *out)
{
	uint64_t v;
	if (cli_parse_u64(arg, &v) < 0 || v == 0 || v > UINT32_MAX) {
		cli_usage_error(cmd, "bad --%s '%s' (a positive number)", what, arg);
		return -1;
	}
	*out = (uint32_t)v;
	return 1;
}

int cli_stream_opt(struct cli_stream *cs, const char *cmd, int c, char *arg)
{
	switch (c) {
	case CLI_OPT_FILTER:
		cs->filter_expr = arg;
		return 1;
	case CLI_OPT_ELF:
		if (cs->n_elfs == CLI_STREAM_MAX_ELFS) {
			cli_usage_error(cmd, "too many --elf options (at most %d)", CLI_STREAM_MAX_ELFS);
			return -1;
		}
		if (parse_elf(arg, &cs->elfs[cs->n_elfs]) < 0) {
			cli_usage_error(cmd, "bad --elf '%s' (FILE or FILE:BASE)", arg);
			return -1;
		}
		cs->n_elfs++;
		return 1;
	case CLI_OPT_ROOT:
		cs->so.root = arg;
		return 1;
	case CLI_OPT_DEBUG_DIR:
		if (cs->n_dirs == CLI_STREAM_MAX_DIRS) {
			cli_usage_error(cmd, "too many --debug-dir options (at most %d)", CLI_STREAM_MAX_DIRS);
			return -1;
		}
		cs->dirs[cs->n_dirs++] = arg;
		return 1;
	case CLI_OPT_SOURCE_ROOT:
		if (cs->n_src_roots == CLI_STREAM_MAX_DIRS) {
			cli_usage_error(cmd, "too many --source-root options (at most %d)", CLI_STREAM_MAX_DIRS);
			return -1;
		}
		cs->src_roots[cs->n_src_roots++] = arg;
		return 1;
	case CLI_OPT_PID:
		return parse_id(cmd, "pid", arg, &cs->so.pid);
	case CLI_OPT_TID:
		return parse_id(cmd, "tid", arg, &cs->so.tid);
	case CLI_OPT_JOBS: {
		uint64_t v;
		if (cli_parse_u64(arg, &v) < 0 || v == 0 || v > 64) {
			cli_usage_error(cmd, "bad --jobs '%s' (1 to 64)", arg);
			return -1;
		}
		cs->so.jobs = (unsigned)v;
		return 1;
	}
	case CLI_OPT_PROGRESS:
	case CLI_OPT_NO_PROGRESS:
		cli_progress_force(c == CLI_OPT_PROGRESS);
		return 1;
	default:
		return 0;
	}
}

void cli_source_rule(const struct cli_stream *cs, const char *file, struct btr_annotate_opts *o)
{
	struct stat st;
	memset(o, 0, sizeof(*o));
	o->sz = sizeof(*o);
	o->source_rule = 1;
	/* Whoever owns the trace chose the source files its DWARF names. */
	o->source_owner = stat(file, &st) == 0 ? st.st_uid : fstat(STDIN_FILENO, &st) == 0 ? st.st_uid : (uid_t)-1;
	o->source_roots = cs->n_src_roots ? cs->src_roots : NULL;
}

int cli_stream_ready(struct cli_stream *cs, const char *cmd)
{
	cs->dirs[cs->n_dirs] = NULL;
	cs->src_roots[cs->n_src_roots] = NULL;
	if (cs->filter_expr && btr_filter_parse(cs->filter_expr, &cs->filter) < 0)
		return cli_usage_error(cmd, "bad --filter '%s'", cs->filter_expr);
	/* Check the --elf files first, so an error names the right file. */
	for (unsigned i = 0; i < cs->n_elfs; i++) {
		uint8_t id[20];
		int e = btr_elf_build_id(cs->elfs[i].path, id, sizeof(id));
		if (e < 0 && e != -BTR_ERR_NOT_FOUND) {
			cli_error("%s: %s", cs->elfs[i].path, btr_errstr(e));
			return EXIT_RUNTIME;
		}
	}
	/* --pid/--tid: the other threads' data is skipped, not decoded (what
	 * is delivered is the same; gaps and statistics are the selection's) */
	cs->so.skip_unselected = cs->so.pid || cs->so.tid;
	cs->so.filter = cs->filter_expr ? &cs->filter : NULL;
	cs->so.debug_dirs = cs->n_dirs ? cs->dirs : NULL;
	cs->so.elfs = cs->elfs;
	cs->so.n_elfs = cs->n_elfs;
	cli_progress_stream(&cs->so, cs->live_stdout);
	return EXIT_OK;
}

/* One cause as a sentence (without "btr: warning: "). */
static void loss_line(char *out, size_t size, const char *file, const char *what, const struct btr_stream_loss *l)
{
	char who[96] = "";
	if (l->kind == BTR_LOSS_CUT || l->kind == BTR_LOSS_MISSING) {
		int n = snprintf(who, sizeof(who), "process %" PRIu32, l->pid);
		if (l->comm[0])
			snprintf(who + n, sizeof(who) - (size_t)n, " (%s)", l->comm);
		else if (l->ppid)
			snprintf(who + n, sizeof(who) - (size_t)n, " (child of %" PRIu32 ")", l->ppid);
	}
	char why[160];
	if (l->detail[0])
		snprintf(why, sizeof(why), "%s: %s", l->detail, btr_errstr(l->reason));
	else
		snprintf(why, sizeof(why), "%s", btr_errstr(l->reason));
	switch (l->kind) {
	case BTR_LOSS_CHUNK:
		snprintf(out, size, "%s: damaged chunk at offset 0x%" PRIx64 " skipped (%s); the %s misses its data", file,
			 l->offset, why, what);
		break;
	case BTR_LOSS_END:
		snprintf(out, size, "%s: the trace is cut at offset 0x%" PRIx64 " (%s); the %s covers what was read", file,
			 l->offset, why, what);
		break;
	case BTR_LOSS_CUT:
		if (l->offset)   /* a cut container */
			snprintf(out, size, "%s: %s: the trace ends before its exit, it ran on (the %s covers what was read)",
				 file, who, what);
		else
			snprintf(out, size, "%s: %s: the trace stops while it ran on (%s); the %s misses the rest", file,
				 who, why, what);
		break;
	case BTR_LOSS_FLOW:
		snprintf(out, size, "%s: the flow of %s is unknown at one place (%s); the %s misses it there", file,
			 l->detail, btr_errstr(l->reason), what);
		break;
	case BTR_LOSS_MISSING:
		snprintf(out, size, "%s: %s ran but is not in the trace (%s); the %s misses it", file, who, why, what);
		break;
	default:
		snprintf(out, size, "%s: data was lost (%s)", file, why);
		break;
	}
}

/* Lines printed already: a command reading one file twice (diff A A)
 * says each cause once. */
static unsigned long said[64];
static unsigned n_said;

static int said_before(const char *line)
{
	unsigned long h = 5381;
	for (const char *c = line; *c; c++)
		h = h * 33 + (unsigned char)*c;
	for (unsigned i = 0; i < n_said; i++)
		if (said[i] == h)
			return 1;
	if (n_said < sizeof(said) / sizeof(said[0]))
		said[n_said++] = h;
	return 0;
}

void cli_losses_print(const char *file, const char *what, const struct btr_stream_loss *l, size_t n, size_t total)
{
	char line[512];
	if (total <= 1) {
		/* One cause: one line, kept until the end (cli_warn), so that
		 * an error of the command says it in the same line. */
		if (total && n)
			loss_line(line, sizeof(line), file, what, &l[0]);
		else
			snprintf(line, sizeof(line), "%s: trace data was lost; the %s covers what was read", file, what);
		cli_warn("%s", line);
		return;
	}
	for (size_t i = 0; i < n && i < total; i++) {   /* several: one line each */
		loss_line(line, sizeof(line), file, what, &l[i]);
		if (!said_before(line))
			cli_error("warning: %s", line);
	}
	if (total > n) {
		snprintf(line, sizeof(line), "%s: %zu more causes of lost data (btr report --format json lists them all)",
			 file, total - n);
		if (!said_before(line))
			cli_error("warning: %s", line);
	}
}
int cli_stream_losses(const char *file, const char *what, const struct btr_stream *s)
{
	if (!btr_stream_data_lost(s))
		return 0;
	struct btr_stream_loss l[CLI_MAX_LOSSES];
	size_t total = btr_stream_losses(s, l, CLI_MAX_LOSSES);
	cli_losses_print(file, what, l, CLI_MAX_LOSSES, total);
	return 1;
}
