/* cmd_import.c - `btr import FILE -o OUT.btr`: a perf.data recording (or
 * another .btr) rewritten as a .btr container, record for record
 * (docs/import.md).  The perf.data reader does the conversion
 * (lib/perf/perfdata.c); the writer makes the file appear complete or not at
 * all. */
#include <inttypes.h>
#include <string.h>

#include "btr/perfdata.h"
#include "btr/trace.h"
#include "cli_cmd.h"

static const struct cli_opt opts[] = {
	{ "output", 'o', CLI_ARG,
	  "  -o, --output FILE      the trace to write (default: FILE with .btr appended;\n"
	  "                         '-': stdout, not a terminal)\n" CLI_OUTPUT_HELP, NULL },
	{ "compress", 'z', CLI_ARG, "  -z, --compress LEVEL   zstd-compress the chunks (1..19, default 0: none)\n", NULL },
	{ "quiet", 'q', CLI_NOARG, "  -q, --quiet            no summary line on stderr\n", NULL },
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"import",
	"Usage: btr import [-o OUT.btr] [-z LEVEL] FILE\n"
	"Convert a perf.data recording (perf record -e intel_pt//, -e intel_bts//, -b;\n"
	"file or pipe mode, perf record -z) into a .btr trace: machine, modules,\n"
	"threads, exec, context switches, PT/BTS data per CPU or thread, LBR samples.\n"
	"Every command also reads perf.data directly; importing gives a checksummed,\n"
	"optionally compressed file with btr's own records.  See docs/import.md.\n\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the input cannot be read or is damaged\n"
	"(nothing is written then), or the output cannot be written.\n",
	1, 1, "missing input FILE", "one input FILE expected, got '%s' too",
};


struct args {
	const char *out;
	int level, quiet;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	uint64_t v;
	switch (key) {
	case 'o': x->out = arg; break;
	case 'z':
		if (cli_parse_u64(arg, &v) < 0 || v > 19)
			return cli_usage_error("import", "bad compression level '%s'", arg);
		x->level = (int)v;
		break;
	case 'q': x->quiet = 1; break;
	}
	return EXIT_OK;
}

int cmd_import(int argc, char **argv)
{
	struct args x = { NULL, 0, 0 };
	int first;
	int prc = cli_cmd_parse(&cmd, argc, argv, NULL, on_opt, &x, &first);
	if (prc != EXIT_OK)
		return prc == CLI_CMD_DONE ? EXIT_OK : prc;
	const char *out = x.out;
	int level = x.level, quiet = x.quiet;
	const char *in = argv[first];
	char defout[4200];
	if (!out) {
		snprintf(defout, sizeof(defout), "%s.btr", in);
		out = defout;
	}
	struct cli_output dst;
	int orc = cli_output_check(&dst, "import", out, CLI_OUTPUT_BINARY);
	if (orc != EXIT_OK)
		return orc;
	dst.quiet = quiet;

	struct btr_trace_reader *r;
	int rc = btr_trace_reader_new(in, &r);
	if (rc < 0) {
		cli_error("%s: %s", in, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	struct btr_trace_info info;
	btr_trace_reader_info(r, &info);
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .compress = level };
	struct btr_trace_writer *w;
	const char *wpath;
	int wfd;
	cli_output_trace_target(&dst, &wpath, &wfd);
	if ((rc = wfd >= 0 ? btr_trace_writer_new_fd(wfd, wpath, &wo, &w) : btr_trace_writer_new(wpath, &wo, &w)) < 0) {
		btr_trace_reader_free(r);
		cli_error("%s: cannot %s: %s", out, rc == -BTR_ERR_NOSPACE || rc == -BTR_ERR_IO ? "write" : "create",
			  btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	struct btr_record rec;
	uint64_t n = 0, counts[BTR_REC__MAX] = { 0 };
	while ((rc = btr_trace_read(r, &rec)) == 0) {
		if ((rc = btr_trace_write(w, &rec)) < 0) {
			btr_trace_writer_abort(w);
			btr_trace_reader_free(r);
			cli_error("%s: cannot write: %s", out, btr_errstr(rc));
			return EXIT_RUNTIME;
		}
		n++;
		if ((unsigned)rec.type < BTR_REC__MAX)
			counts[rec.type]++;
	}
	uint64_t off = btr_trace_reader_offset(r);
	btr_trace_reader_free(r);
	if (rc != -BTR_ERR_EOS) {
		/* a damaged input: no half conversion under the output name */
		btr_trace_writer_abort(w);
		cli_error("%s: %s near offset 0x%" PRIx64 "; nothing written", in, btr_errstr(rc), off);
		return EXIT_RUNTIME;
	}
	if ((rc = btr_trace_writer_close(w)) < 0) {
		cli_error("%s: cannot write: %s", out, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	cli_output_replaced(&dst);
	cli_output_discard(&dst);
	if (!quiet)
		fprintf(stderr,
			"btr: %s: %" PRIu64 " records (%" PRIu64 " modules, %" PRIu64 " switches, %" PRIu64
			" PT, %" PRIu64 " BTS, %" PRIu64 " LBR) from %s %s\n",
			out, n, counts[BTR_REC_MODULE_LOAD], counts[BTR_REC_SWITCH], counts[BTR_REC_PT],
			counts[BTR_REC_BTS], counts[BTR_REC_LBR], info.format == BTR_TRACE_FMT_PERF ? "perf.data" : ".btr",
			in);
	return EXIT_OK;
}
