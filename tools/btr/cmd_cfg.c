/* cmd_cfg.c - `btr cfg FILE --function SYM -o OUT.svg|.dot|.png`
 * (docs/cfg.md): a function's CFG heat map, rendered by Graphviz `dot`. */
#include <getopt.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr cfg [OPTIONS] FILE --function SYM -o OUT.svg|OUT.dot|OUT.png\n"
		"Draw a function's control-flow graph, built from its code, as a heat map:\n"
		"blocks coloured by executions (never run: grey, dashed), edges labelled with\n"
		"their counts and drawn thicker when hot, labels with address, symbol+offset\n"
		"and source line.  .svg and .png are rendered with Graphviz `dot`.\n\n"
		"Options:\n"
		"  --function SYM         the function: name, C++ name, or module+0xOFF\n"
		"  -o, --output OUT       output file; its extension picks the format\n"
		CLI_OUTPUT_HELP
		"  --max-blocks N         collapse cold regions beyond N nodes (default 300)\n"
		"  --diff B               colour by the difference to trace B (red: B ran a\n"
		"                         block more, blue: less)\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read, the function is\n"
		"not in it, dot is missing, or data was lost.\n");
}

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

int cmd_cfg(int argc, char **argv)
{
	static const struct option lopts[] = { CLI_STREAM_LONGOPTS,
					       { "function", required_argument, NULL, 'F' },
					       { "output", required_argument, NULL, 'o' },
					       { "max-blocks", required_argument, NULL, 'M' },
					       { "diff", required_argument, NULL, 'D' },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	struct cli_stream cs;
	cli_stream_init(&cs);
	struct btr_cfg_opts o = { .sz = sizeof(o) };
	const char *out = NULL, *diff = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lopts, NULL)) != -1) {
		int r = cli_stream_opt(&cs, "cfg", c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r > 0)
			continue;
		uint64_t v;
		switch (c) {
		case 'F':
			o.function = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'M':
			if (cli_parse_u64(optarg, &v) < 0 || v < 2 || v > 100000)
				return cli_usage_error("cfg", "bad --max-blocks '%s' (2..100000)", optarg);
			o.max_blocks = (unsigned)v;
			break;
		case 'D':
			diff = optarg;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			return cli_usage_error("cfg", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("cfg", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("cfg", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	if (!o.function)
		return cli_usage_error("cfg", "missing --function SYM");
	if (!out)
		return cli_usage_error("cfg", "missing -o OUT");
	const char *ext = strrchr(out, '.');
	const char *fmt = !ext ? NULL : !strcmp(ext, ".svg") ? "svg" : !strcmp(ext, ".png") ? "png"
					  : !strcmp(ext, ".dot") || !strcmp(ext, ".gv") ? "dot" : NULL;
	if (!fmt)
		return cli_usage_error("cfg", "'%s': the output must end in .svg, .png or .dot", out);
	int rc = cli_stream_ready(&cs, "cfg");
	if (rc != EXIT_OK)
		return rc;
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
	rc = cli_views_run("graph", argv[optind], &cs, list, 2);
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
		cli_error("%s: function '%s' %s", argv[optind], o.function,
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
