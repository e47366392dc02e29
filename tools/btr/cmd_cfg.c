/* cmd_cfg.c - `btr cfg FILE --function SYM -o OUT.svg|.dot|.png`
 * (docs/cfg.md): a function's CFG heat map, rendered by Graphviz `dot`. */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_cmd.h"

extern char **environ;

enum { O_FUNCTION = 256, O_MAX_BLOCKS, O_DIFF };

static const struct cli_opt opts[] = {
	{ "function", O_FUNCTION, CLI_ARG, "  --function SYM         the function: name, C++ name, or module+0xOFF\n",
	  "missing --function SYM" },
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       output file; its extension picks the format\n" CLI_OUTPUT_HELP,
	  "missing -o OUT" },
	{ "max-blocks", O_MAX_BLOCKS, CLI_ARG, "  --max-blocks N         collapse cold regions beyond N nodes (default 300)\n", NULL },
	{ "diff", O_DIFF, CLI_ARG,
	  "  --diff B               colour by the difference to trace B (red: B ran a\n"
	  "                         block more, blue: less)\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"cfg",
	"Usage: btr cfg [OPTIONS] FILE --function SYM -o OUT.svg|OUT.dot|OUT.png\n"
	"Draw a function's control-flow graph, built from its code, as a heat map:\n"
	"blocks coloured by executions (never run: grey, dashed), edges labelled with\n"
	"their counts and drawn thicker when hot, labels with address, symbol+offset\n"
	"and source line.  .svg and .png are rendered with Graphviz `dot`.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read, the function is\n"
	"not in it, dot is missing, or data was lost.\n",
	1, 1, NULL,
};

static int write_dot(void *ctx, FILE *f)
{
	return btr_analysis_write(ctx, f, "dot");
}

/* Renders @dotfile into @out with `dot -T@fmt`, dot's stdout being the
 * output file (cli_output: written whole or not at all). */
static int render(const char *dotfile, const char *fmt, struct cli_output *out)
{
	char targ[16];
	snprintf(targ, sizeof(targ), "-T%s", fmt);
	char *argv[] = { "dot", targ, (char *)dotfile, NULL };
	FILE *f = cli_output_open(out);
	if (!f)
		return EXIT_RUNTIME;
	fflush(f);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fileno(f), STDOUT_FILENO);
	pid_t pid;
	int st = 0;
	int e = posix_spawnp(&pid, "dot", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e != 0) {
		cli_error("%s: Graphviz 'dot' not found (install graphviz)", out->name);
		cli_output_close(out, 0);
		return EXIT_RUNTIME;
	}
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		cli_error("%s: dot failed to render the graph", out->name);
		cli_output_close(out, 0);
		return EXIT_RUNTIME;
	}
	return cli_output_close(out, 1);
}

struct args {
	struct btr_cfg_opts o;
	const char *out, *diff, *fmt;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	uint64_t v;
	switch (key) {
	case O_FUNCTION: x->o.function = arg; break;
	case 'o': x->out = arg; break;
	case O_MAX_BLOCKS:
		if (cli_parse_u64(arg, &v) < 0 || v < 2 || v > 100000)
			return cli_usage_error("cfg", "bad --max-blocks '%s' (2..100000)", arg);
		x->o.max_blocks = (unsigned)v;
		break;
	case O_DIFF: x->diff = arg; break;
	case CLI_OPT_END: {
		const char *ext = strrchr(x->out, '.');
		x->fmt = !ext ? NULL : !strcmp(ext, ".svg") ? "svg" : !strcmp(ext, ".png") ? "png"
			: !strcmp(ext, ".dot") || !strcmp(ext, ".gv") ? "dot" : NULL;
		if (!x->fmt)
			return cli_usage_error("cfg", "'%s': the output must end in .svg, .png or .dot", x->out);
		break;
	}
	}
	return EXIT_OK;
}

int cmd_cfg(int argc, char **argv)
{
	struct args x = { .o = { .sz = sizeof(x.o) } };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	struct btr_cfg_opts o = x.o;
	const char *out = x.out, *diff = x.diff, *fmt = x.fmt;
	(void)file;
	struct cli_output dst;
	if ((rc = cli_output_check(&dst, "cfg", out, !strcmp(fmt, "png") ? CLI_OUTPUT_BINARY : 0)) != EXIT_OK)
		return rc;
	struct btr_analysis *bl = NULL, *bd = NULL, *cfg = NULL;
	int lost = 0;
	if (btr_blocks_new(&bl) < 0 || (diff && btr_blocks_new(&bd) < 0)) {
		cli_error("out of memory");
		rc = EXIT_RUNTIME;
		goto out;
	}
	o.diff = bd;
	if (btr_cfg_new(bl, &o, &cfg) < 0) {
		cli_error("out of memory");
		rc = EXIT_RUNTIME;
		goto out;
	}
	struct btr_analysis *list[2] = { bl, cfg };
	rc = cli_views_run("graph", argv[first], &cs, list, 2);
	if (rc == -EXIT_RUNTIME)
		lost = 1;
	else if (rc != EXIT_OK)
		goto out;
	if (diff) {
		rc = cli_views_run("graph", diff, &cs, &bd, 1);
		if (rc == -EXIT_RUNTIME)
			lost = 1;
		else if (rc != EXIT_OK)
			goto out;
	}
	/* Find the function first, for one clear message. */
	struct btr_funcgraph *g;
	rc = btr_funcgraph_build(bl, o.function, &g);
	if (rc < 0) {
		cli_error("%s: function '%s' %s", argv[first], o.function,
			  rc == -BTR_ERR_NOT_FOUND ? "is in no module of the trace" : btr_errstr(rc));
		rc = EXIT_RUNTIME;
		goto out;
	}
	btr_funcgraph_free(g);
	if (!strcmp(fmt, "dot")) {
		rc = cli_write_file(&dst, write_dot, cfg);
	} else {
		char dotf[] = "/tmp/btr_cfgXXXXXX";
		int fd = mkstemp(dotf);
		FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
		if (!f) {
			cli_error("cannot create a temporary file: %m");
			rc = EXIT_RUNTIME;
			goto out;
		}
		int w = btr_analysis_write(cfg, f, "dot");
		if (fclose(f) != 0 || w < 0) {
			cli_error("%s: %s", out, btr_errstr(w < 0 ? w : -BTR_ERR_IO));
			rc = EXIT_RUNTIME;
		} else {
			rc = render(dotf, fmt, &dst);
		}
		unlink(dotf);
	}
	if (rc == EXIT_OK && btr_cfg_collapsed(cfg) > 0)
		fprintf(stderr, "btr: note: %ld cold blocks of %s collapsed (--max-blocks)\n",
			btr_cfg_collapsed(cfg), o.function);
	if (rc == EXIT_OK && lost)
		rc = EXIT_RUNTIME;
out:
	btr_analysis_free(cfg);
	btr_analysis_free(bl);
	btr_analysis_free(bd);
	return rc;
}
