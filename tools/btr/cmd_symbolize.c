/* cmd_symbolize.c - `btr symbolize`: addresses -> function+offset, file:line.
 *
 *   btr symbolize --elf FILE[:BASE] [--elf ...] [--debug-dir DIR...] [--basenames]
 *                 [--format json] [ADDR...]
 *
 * One line per address: "0xADDR name+0xoff file:line", "??:0" when there
 * is no line information (addr2line's convention, so columns stay fixed).
 * Without ADDR arguments, addresses are read from stdin, one per line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cmd.h"

static const struct cli_opt opts[] = {
	{ "elf", 'e', CLI_ARG,
	  "  -e, --elf FILE[:BASE]  an executable or shared object; BASE is its load bias\n"
	  "                         (PIE/.so: where vaddr 0 is mapped; ignored for non-PIE\n"
	  "                         executables); later files win where they overlap\n", "no --elf FILE given" },
	{ "debug-dir", 'd', CLI_ARG,
	  "  -d, --debug-dir DIR    look for separate debug files (DIR/.build-id/xx/rest.debug)\n"
	  "                         in DIR instead of /usr/lib/debug; repeatable\n", NULL },
	{ "basenames", 's', CLI_NOARG, "  -s, --basenames        print only the file name of source files\n", NULL },
	{ "format", 'F', CLI_ARG,
	  "      --format FMT       text (default) or json (an array of objects with\n"
	  "                         addr, symbol, file, line)\n", NULL },
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"symbolize",
	"Usage: btr symbolize --elf FILE[:BASE] [--elf FILE[:BASE]...] [OPTIONS] [ADDR...]\n"
	"Print \"0xADDR function+0xoff file:line\" for each address.\n"
	"\n",
	opts,
	"\n"
	"ADDR is hex (0x...) or decimal.  Without ADDR, addresses are read from stdin,\n"
	"one per line.  Unknown addresses print as themselves and \"??:0\".\n"
	"Exit: 0 ok, 2 usage error (bad address), 3 a file cannot be loaded.\n",
	0, -1, NULL, NULL,
};


struct out {
	struct btr_image *img;
	int json, basenames, count;
};

static void print_one(struct out *o, uint64_t addr)
{
	char sym[512];
	const char *file = NULL;
	int line = 0;
	btr_image_symbolize(o->img, addr, sym, sizeof(sym));
	if (btr_image_line(o->img, addr, &file, &line) != 0)
		file = NULL;
	if (file && o->basenames && strrchr(file, '/'))
		file = strrchr(file, '/') + 1;
	if (!o->json) {
		if (file)
			printf("0x%llx %s %s:%d\n", (unsigned long long)addr, sym, file, line);
		else
			printf("0x%llx %s ??:0\n", (unsigned long long)addr, sym);
		return;
	}
	printf("%s\n  {\"addr\": \"0x%llx\", \"symbol\": ", o->count ? "," : "",
	       (unsigned long long)addr);
	btr_json_str(stdout, sym);
	printf(", \"file\": ");
	if (file)
		btr_json_str(stdout, file);
	else
		printf("null");
	printf(", \"line\": %d}", file ? line : 0);
	o->count++;
}

/* Splits "FILE:BASE" at the last colon if what follows is a number, so
 * that file names containing colons still work without a base. */
static int parse_elf_arg(char *arg, const char **file, uint64_t *base)
{
	char *colon = strrchr(arg, ':');
	*file = arg;
	*base = 0;
	if (colon && colon != arg && cli_parse_u64(colon + 1, base) == 0) {
		*colon = 0;
		return 0;
	}
	if (colon && colon[1] && (colon[1] >= '0' && colon[1] <= '9'))
		return -1;  /* looks like a base but is not a number */
	return 0;
}

struct args {
	char **elfs;
	const char **dirs;
	int nelfs, ndirs;
	struct out *o;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	switch (key) {
	case 'e': x->elfs[x->nelfs++] = arg; break;
	case 'd': x->dirs[x->ndirs++] = arg; break;
	case 's': x->o->basenames = 1; break;
	case 'F':
		return cli_format_text_json("symbolize", arg, &x->o->json, "unknown format '%s'");
	}
	return EXIT_OK;
}

int cmd_symbolize(int argc, char **argv)
{
	/* Both lists are at most argc long: one option argument each. */
	char **elfs = calloc((size_t)argc + 1, sizeof(*elfs));
	const char **dirs = calloc((size_t)argc + 1, sizeof(*dirs));
	int nelfs = 0, ndirs = 0, rc = EXIT_OK, first = argc;
	struct out o = { 0 };
	if (!elfs || !dirs) {
		free(elfs);
		free(dirs);
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	struct args x = { elfs, dirs, 0, 0, &o };
	rc = cli_cmd_parse(&cmd, argc, argv, NULL, on_opt, &x, &first);
	nelfs = x.nelfs;
	ndirs = x.ndirs;
	if (rc != EXIT_OK) {
		rc = rc == CLI_CMD_DONE ? EXIT_OK : rc;
		goto out;
	}
	/* Check every address before loading anything: a typo is a usage
	 * error, not a half-printed result. */
	for (int i = first; i < argc; i++) {
		uint64_t a;
		if (cli_parse_u64(argv[i], &a) != 0) {
			rc = cli_usage_error("symbolize", "bad address '%s'", argv[i]);
			goto out;
		}
	}
	if (btr_image_new(&o.img) != 0 ||
	    (ndirs && btr_image_set_debug_dirs(o.img, dirs, (size_t)ndirs) != 0)) {
		cli_error("out of memory");
		rc = EXIT_RUNTIME;
		goto out;
	}
	for (int i = 0; i < nelfs; i++) {
		const char *file;
		uint64_t base;
		if (parse_elf_arg(elfs[i], &file, &base) != 0) {
			rc = cli_usage_error("symbolize", "bad base in '%s'", elfs[i]);
			goto out;
		}
		int err = btr_image_add_elf(o.img, file, base, 1);
		if (err) {
			cli_error("%s: %s", file, btr_errstr(err));
			rc = EXIT_RUNTIME;
			goto out;
		}
	}
	if (o.json)
		printf("[");
	if (first < argc) {
		for (int i = first; i < argc; i++) {
			uint64_t a = 0;
			cli_parse_u64(argv[i], &a);
			print_one(&o, a);
		}
	} else {
		char line[256];
		while (fgets(line, sizeof(line), stdin)) {
			char *s = line + strspn(line, " \t");
			s[strcspn(s, " \t\r\n")] = 0;
			if (!*s)
				continue;
			uint64_t a;
			if (cli_parse_u64(s, &a) != 0) {
				if (o.json)
					printf("\n]\n");
				rc = cli_usage_error("symbolize", "bad address '%s' on stdin", s);
				goto out;
			}
			print_one(&o, a);
			if (!o.json)
				fflush(stdout);  /* interactive use through a pipe */
		}
	}
	if (o.json)
		printf("%s]\n", o.count ? "\n" : "");
out:
	btr_image_free(o.img);
	free(elfs);
	free(dirs);
	return rc;
}
