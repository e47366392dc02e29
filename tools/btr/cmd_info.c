/* cmd_info.c - btr info: which capture backends work here, and why. */
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "btr/capture.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: btr info [--format text|json]\n"
		   "Probes every capture backend (pt, bts, lbr, qemu, step) and prints whether it\n"
		   "is usable on this machine and the exact reason.\n\n"
		   "  -f, --format FMT  text (default): one line per backend; json: an object with\n"
		   "                    one member per backend, {\"usable\": bool, \"reason\": string}\n"
		   "  -h, --help        this help\n");
}


int cmd_info(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int json = 0, c;
	while ((c = getopt_long(argc, argv, "f:h", lo, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "json"))
				json = 1;
			else if (!strcmp(optarg, "text"))
				json = 0;
			else
				return cli_usage_error("info", "unknown format '%s'", optarg);
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			return cli_usage_error("info", "unknown option");
		}
	}
	if (optind < argc)
		return cli_usage_error("info", "unexpected argument '%s'", argv[optind]);

	if (json)
		printf("{");
	for (size_t i = 0; i < btr_capture_count(); i++) {
		const struct btr_capture_backend *b = btr_capture_get(i);
		struct btr_capture_probe p;
		btr_capture_probe_backend(b, &p);
		if (json) {
			printf("%s\n  ", i ? "," : "");
			cli_json_str(stdout, b->name);
			printf(": {\"usable\": %s, \"reason\": ", p.usable ? "true" : "false");
			cli_json_str(stdout, p.reason);
			printf("}");
		} else {
			printf("%-5s %-3s %s\n", b->name, p.usable ? "yes" : "no", p.reason);
		}
	}
	if (json)
		printf("\n}\n");
	return EXIT_OK;
}
