/* cli_cmd.c - the one option loop of the btr commands (cli_cmd.h). */
#include <ctype.h>
#include <getopt.h>
#include <string.h>

#include "cli_cmd.h"

#define MAX_OPTS 64

void cli_cmd_help(const struct cli_cmd *cmd, FILE *f)
{
	fputs(cmd->usage, f);
	for (const struct cli_opt *o = cmd->opts; o->name; o++)
		if (o->help)
			fputs(o->help, f);
	if (cmd->epilog)
		fputs(cmd->epilog, f);
}

int cli_cmd_parse(const struct cli_cmd *cmd, int argc, char **argv, struct cli_stream *cs, cli_opt_fn on_opt,
		  void *ctx, int *first)
{
	struct option lopts[MAX_OPTS + 1];
	char shorts[2 * MAX_OPTS + 2];
	unsigned char seen[MAX_OPTS];
	size_t n = 0, ns = 0;
	memset(lopts, 0, sizeof(lopts));
	memset(seen, 0, sizeof(seen));
	const struct cli_opt *tab[MAX_OPTS];
	if (cmd->flags & CLI_CMD_POSIX)
		shorts[ns++] = '+';
	for (const struct cli_opt *o = cmd->opts; o->name && n < MAX_OPTS; o++) {
		if (o->only && !(o->only & cmd->sub))
			continue;
		tab[n] = o;
		lopts[n].name = o->name;
		lopts[n].has_arg = o->has_arg ? required_argument : no_argument;
		lopts[n].val = o->key;
		if (o->key > 0 && o->key < 128 && isalnum(o->key)) {
			shorts[ns++] = (char)o->key;
			if (o->has_arg)
				shorts[ns++] = ':';
		}
		n++;
	}
	shorts[ns] = 0;
	if (cs)
		cli_stream_init(cs);
	optind = 0;   /* glibc: full re-initialization (argv may be shifted) */
	opterr = 0;   /* one line for one mistake: ours, naming the option */
	int c;
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		size_t i = 0;
		while (i < n && lopts[i].val != c)
			i++;
		if (i == n || c == '?') {
			if (cmd->unknown_msg)
				return cli_usage_error(cmd->name, "%s", cmd->unknown_msg);
			size_t k = 0;
			while (optopt && k < n && lopts[k].val != optopt)
				k++;
			if (optopt && k < n && (optopt >= 128 || !isalnum(optopt)))   /* --LONG without its argument */
				return cli_usage_error(cmd->name, "option '--%s' needs an argument", lopts[k].name);
			if (optopt && k < n)   /* a known short option without its argument */
				return cli_usage_error(cmd->name, "option '-%c' needs an argument", optopt);
			if (optopt)
				return cli_usage_error(cmd->name, "unknown option '-%c'", optopt);
			const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
			for (k = 0; k < n && strncmp(bad, "--", 2) == 0; k++)
				if (!strcmp(bad + 2, lopts[k].name) && lopts[k].has_arg)
					return cli_usage_error(cmd->name, "option '%s' needs an argument", bad);
			return cli_usage_error(cmd->name, "unknown option '%s'", bad);
		}
		seen[i] = 1;
		if (c == 'h' && !strcmp(tab[i]->name, "help")) {
			cli_cmd_help(cmd, stdout);
			return CLI_CMD_DONE;
		}
		if (cs && ((c >= CLI_OPT_FILTER && c <= CLI_OPT_SOURCE_ROOT) ||
			   (c == CLI_OPT_JOBS && !strcmp(tab[i]->name, "jobs")))) {
			if (cli_stream_opt(cs, cmd->name, c, optarg) < 0)
				return EXIT_USAGE;
			continue;
		}
		int rc = on_opt ? on_opt(ctx, c, optarg) : EXIT_OK;
		if (rc != EXIT_OK)
			return rc;
	}
	int files = argc - optind;
	int too_many = cmd->max_files >= 0 && files > cmd->max_files;
	if (files < cmd->min_files || too_many) {
		const char *msg = too_many ? cmd->extra_msg : cmd->missing_msg;
		const char *s = msg ? strstr(msg, "%s") : NULL;
		if (s && too_many)   /* names the first operand too many */
			return cli_usage_error(cmd->name, "%.*s%s%s", (int)(s - msg), msg, argv[optind + cmd->max_files],
					       s + 2);
		if (msg)
			return cli_usage_error(cmd->name, "%s", msg);
		if (!too_many)
			return cli_usage_error(cmd->name, "missing trace FILE");
		return cli_usage_error(cmd->name, "one trace FILE expected, got '%s' too", argv[optind + cmd->max_files]);
	}
	for (size_t i = 0; i < n; i++)
		if (tab[i]->missing && !seen[i])
			return cli_usage_error(cmd->name, "%s", tab[i]->missing);
	*first = optind;
	int rc = on_opt ? on_opt(ctx, CLI_OPT_END, NULL) : EXIT_OK;
	if (rc != EXIT_OK)
		return rc;
	return cs ? cli_stream_ready(cs, cmd->name) : EXIT_OK;
}

int cli_format_text_json(const char *cmd, const char *arg, int *json, const char *msg)
{
	if (strcmp(arg, "json") && strcmp(arg, "text"))
		return cli_usage_error(cmd, msg, arg);
	*json = !strcmp(arg, "json");
	return EXIT_OK;
}

int cli_format_check(const char *cmd, const char *analysis, const char *arg, int commas)
{
	const char *const *f = btr_analysis_formats(analysis);
	size_t n = 0;
	for (; f && f[n]; n++)
		if (!strcmp(f[n], arg))
			return EXIT_OK;
	char list[256] = "";
	size_t len = 0;
	for (size_t i = 0; i < n && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
					!i ? "" : commas || i + 1 < n ? ", " : " or ", f[i]);
	return cli_usage_error(cmd, "unknown format '%s' (%s)", arg, list);
}
