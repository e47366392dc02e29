/* cmd_diff.c - `btr diff A B` (docs/diff.md): blocks and edges only in
 * one run and those whose counts changed most, by module-relative
 * address, in text or JSON. */
#include <inttypes.h>
#include <errno.h>
#include <string.h>

#include "cli_cmd.h"

enum { O_FORMAT = 256, O_TOP };

static const struct cli_opt opts[] = {
	{ "format", O_FORMAT, CLI_ARG, "  --format text|json     output format (default text)\n", NULL },
	{ "top", O_TOP, CLI_ARG, "  --top N                changed blocks listed (default 20; 0: all)\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"diff",
	"Usage: btr diff [OPTIONS] A B\n"
	"Compare two traces by basic block and edge, module-relative (so two runs of\n"
	"a PIE compare): blocks and edges only in A, only in B, and the blocks whose\n"
	"execution counts changed most.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok (also when the runs differ); 2 usage error; 3 a trace cannot\n"
	"be read or data was lost.\n",
	2, 2, "two traces A and B expected", "two traces A and B expected",
};

static void sym(struct btr_analysis *bl, const char *module, uint64_t addr, char *buf, size_t n)
{
	const struct btr_blocks_result *r = btr_blocks_get(bl);
	long m = btr_blocks_module_index(r, module);
	struct btr_image *img = m >= 0 ? btr_blocks_module_image(bl, (uint32_t)m) : NULL;
	if (img)
		btr_image_symbolize(img, addr, buf, n);
	else
		snprintf(buf, n, "%s+0x%" PRIx64, module, addr);
}

static void text_items(const char *title, const struct btr_diff_item *v, size_t n, size_t top, int edges,
		       struct btr_analysis *bl)
{
	printf("%s: %zu\n", title, n);
	for (size_t i = 0; i < n && (!top || i < top); i++) {
		char s[512];
		sym(bl, v[i].module, v[i].start, s, sizeof(s));
		if (edges)
			printf("  %s+0x%" PRIx64 " -> %s+0x%" PRIx64 "%s  A %" PRIu64 "  B %" PRIu64 "  %s\n",
			       v[i].module, v[i].start, v[i].to_module ? v[i].to_module : "", v[i].end,
			       v[i].taken ? "" : " (not taken)", v[i].count_a, v[i].count_b, s);
		else
			printf("  %s+0x%" PRIx64 "-0x%" PRIx64 "  A %" PRIu64 "  B %" PRIu64 "  %+" PRId64 "  %s\n",
			       v[i].module, v[i].start, v[i].end, v[i].count_a, v[i].count_b, v[i].delta, s);
	}
	if (top && n > top)
		printf("  ... %zu more\n", n - top);
}

static void json_items(const char *key, const struct btr_diff_item *v, size_t n, size_t top, int edges,
		       int last)
{
	printf("  \"%s\": [", key);
	for (size_t i = 0; i < n && (!top || i < top); i++) {
		printf("%s\n    {\"module\": ", i ? "," : "");
		btr_json_str(stdout, v[i].module);
		if (edges) {
			printf(", \"from\": \"0x%" PRIx64 "\", \"to_module\": ", v[i].start);
			btr_json_str(stdout, v[i].to_module);
			printf(", \"to\": \"0x%" PRIx64 "\", \"taken\": %s", v[i].end, v[i].taken ? "true" : "false");
		} else {
			printf(", \"start\": \"0x%" PRIx64 "\", \"end\": \"0x%" PRIx64 "\"", v[i].start, v[i].end);
		}
		printf(", \"count_a\": %" PRIu64 ", \"count_b\": %" PRIu64 ", \"delta\": %" PRId64 "}", v[i].count_a,
		       v[i].count_b, v[i].delta);
	}
	printf("%s]%s\n", n ? "\n  " : "", last ? "" : ",");
}

struct args {
	int json;
	uint64_t top;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	if (key == O_FORMAT) {
		return cli_format_text_json("diff", arg, &x->json, "unknown format '%s' (text or json)");
	} else if (key == O_TOP) {
		if (cli_parse_u64(arg, &x->top) < 0 || x->top > 1000000)
			return cli_usage_error("diff", "bad --top '%s'", arg);
	}
	return EXIT_OK;
}

int cmd_diff(int argc, char **argv)
{
	struct args x = { 0, 20 };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	int json = x.json;
	uint64_t top = x.top;
	(void)file;
	struct btr_analysis *ba = NULL, *bb = NULL;
	if (btr_blocks_new(&ba) < 0 || btr_blocks_new(&bb) < 0) {
		cli_error("out of memory");
		btr_analysis_free(ba);
		return EXIT_RUNTIME;
	}
	int lost = 0;
	rc = cli_views_run("diff", argv[first], &cs, &ba, 1);
	if (rc == -EXIT_RUNTIME)
		lost = 1;
	else if (rc != EXIT_OK)
		goto out;
	rc = cli_views_run("diff", argv[first + 1], &cs, &bb, 1);
	if (rc == -EXIT_RUNTIME)
		lost = 1;
	else if (rc != EXIT_OK)
		goto out;
	struct btr_diff *d;
	rc = btr_diff_compute(btr_blocks_get(ba), btr_blocks_get(bb), &d);
	if (rc < 0) {
		cli_error("diff: %s", btr_errstr(rc));
		rc = EXIT_RUNTIME;
		goto out;
	}
	if (json) {
		printf("{\n  \"a\": ");
		btr_json_str(stdout, argv[first]);
		printf(",\n  \"b\": ");
		btr_json_str(stdout, argv[first + 1]);
		printf(",\n  \"blocks_same\": %zu,\n", d->n_blocks_same);
		json_items("blocks_only_a", d->blocks_only_a, d->n_blocks_only_a, 0, 0, 0);
		json_items("blocks_only_b", d->blocks_only_b, d->n_blocks_only_b, 0, 0, 0);
		json_items("blocks_changed", d->blocks_changed, d->n_blocks_changed, (size_t)top, 0, 0);
		printf("  \"n_blocks_changed\": %zu,\n", d->n_blocks_changed);
		json_items("edges_only_a", d->edges_only_a, d->n_edges_only_a, 0, 1, 0);
		json_items("edges_only_b", d->edges_only_b, d->n_edges_only_b, 0, 1, 1);
		printf("}\n");
	} else {
		printf("A: %s\nB: %s\n", argv[first], argv[first + 1]);
		printf("blocks: %zu only in A, %zu only in B, %zu changed, %zu same\n", d->n_blocks_only_a,
		       d->n_blocks_only_b, d->n_blocks_changed, d->n_blocks_same);
		printf("edges: %zu only in A, %zu only in B\n\n", d->n_edges_only_a, d->n_edges_only_b);
		text_items("blocks only in A", d->blocks_only_a, d->n_blocks_only_a, 0, 0, ba);
		text_items("blocks only in B", d->blocks_only_b, d->n_blocks_only_b, 0, 0, bb);
		text_items("blocks changed most", d->blocks_changed, d->n_blocks_changed, (size_t)top, 0, ba);
		text_items("edges only in A", d->edges_only_a, d->n_edges_only_a, 0, 1, ba);
		text_items("edges only in B", d->edges_only_b, d->n_edges_only_b, 0, 1, bb);
	}
	btr_diff_free(d);
	if (fflush(stdout) || ferror(stdout)) {
		cli_error("writing the output: %s", strerror(errno ? errno : EIO));
		rc = EXIT_RUNTIME;
	} else {
		rc = lost ? EXIT_RUNTIME : EXIT_OK;
	}
out:
	btr_analysis_free(ba);
	btr_analysis_free(bb);
	return rc;
}
