/* cli_progress.c - the progress line on stderr (cli.h). */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROGRESS_INTERVAL_NS 250000000ull   /* at most 4 redraws a second */

static struct {
	int forced;        /* -1: not forced (BTR_PROGRESS, else a terminal), 0 off, 1 on */
	int shown;         /* a line is on stderr now */
	uint64_t last_ns;  /* when it was drawn */
} pg = { -1, 0, 0 };

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cli_progress_force(int on)
{
	pg.forced = on ? 1 : 0;
}

int cli_progress_wanted(int live_stdout)
{
	if (pg.forced >= 0)
		return pg.forced;
	const char *e = getenv("BTR_PROGRESS");
	if (e && *e)
		return strcmp(e, "0") != 0;
	/* A command that writes its results while it reads would mix them
	 * with the line on the same terminal. */
	return isatty(2) && !(live_stdout && isatty(1));
}

int cli_progress_asked(void)
{
	if (pg.forced >= 0)
		return pg.forced;
	const char *e = getenv("BTR_PROGRESS");
	return e && *e && strcmp(e, "0") != 0;
}

void cli_progress_show(const char *fmt, ...)
{
	uint64_t t = now_ns();
	if (pg.shown && t - pg.last_ns < PROGRESS_INTERVAL_NS)
		return;
	char line[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* stdout first: whatever a command printed stays above the line. */
	fflush(stdout);
	/* \r, the text, and "erase to the end of the line" (ECMA-48 EL):
	 * one line, rewritten in place; kept short so that it never wraps. */
	fprintf(stderr, "\rbtr: %.70s\033[K", line);
	fflush(stderr);
	pg.shown = 1;
	pg.last_ns = t;
}

void cli_progress_clear(void)
{
	if (!pg.shown)
		return;
	fputs("\r\033[K", stderr);
	fflush(stderr);
	pg.shown = 0;
}

void cli_progress_bytes(char *buf, size_t size, uint64_t n)
{
	if (n < (1u << 20))
		snprintf(buf, size, "%.1f KiB", (double)n / 1024);
	else if (n < (1ull << 30))
		snprintf(buf, size, "%.1f MiB", (double)n / (1 << 20));
	else
		snprintf(buf, size, "%.2f GiB", (double)n / (1 << 30));
}

/* btr_stream_opts.progress */
static void stream_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	char d[32], t[32];
	cli_progress_bytes(d, sizeof(d), done);
	if (!total) {          /* a pipe: the size is not known */
		cli_progress_show("reading the trace: %s", d);
		return;
	}
	if (done >= total) {   /* the input ended: reading is over */
		cli_progress_clear();
		return;
	}
	cli_progress_bytes(t, sizeof(t), total);
	cli_progress_show("reading the trace: %s of %s (%u%%)", d, t, (unsigned)(done * 100 / total));
}

void cli_progress_stream(struct btr_stream_opts *so, int live_stdout)
{
	so->progress = cli_progress_wanted(live_stdout) ? stream_progress : NULL;
	so->progress_ctx = NULL;
}
