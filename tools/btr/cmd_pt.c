/* cmd_pt.c - `btr pt`: dispatches `btr pt dump` (here) and `btr pt decode`
 * (cmd_pt_decode.c, the flow decoder's CLI).
 *
 * `btr pt dump FILE` prints one line per Intel PT packet; the format is
 * specified in docs/pt-dump.md.  FILE is a raw PT byte stream, a .btr
 * trace or a perf.data file (both read through btr_trace_reader_*, which
 * yields the PT payloads as BTR_REC_PT records, one stream per thread and
 * CPU).  Raw files are read in 1 MiB pieces and fed to the streaming
 * packet decoder, so memory stays constant whatever the file size.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_cmd.h"
#include "btr/pt.h"
#include "btr/ptflow.h"
#include "btr/trace.h"

static void pt_usage(FILE *f)
{
	fprintf(f, "Usage: btr pt dump [OPTIONS] FILE\n"
		   "       btr pt decode [OPTIONS] FILE   (btr pt decode --help)\n"
		   "Intel PT tools.\n");
}

enum { O_RAW = 256, O_NOSYNC, O_CPU, O_TID, O_STATS, O_FORMAT, O_ERRATA };

static const struct cli_opt dump_opts[] = {
	{ "raw", O_RAW, CLI_NOARG, "  --raw            treat FILE as raw PT bytes whatever it starts with\n", NULL },
	{ "no-sync", O_NOSYNC, CLI_NOARG, "  --no-sync        decode from the first byte, not from the first PSB\n", NULL },
	{ "cpu", O_CPU, CLI_ARG, "  --cpu N          only the PT streams of CPU N\n", NULL },
	{ "tid", O_TID, CLI_ARG, "  --tid N          only the PT streams of thread N\n", NULL },
	{ "errata-cpu", O_ERRATA, CLI_ARG,
	  "  --errata-cpu F/M[/S]  apply the packet-level errata of that CPU family/\n"
	  "                   model (SKD007: a CYC cut by an OVF reads as the OVF;\n"
	  "                   SKZ84: a TMA with reserved bits set and the byte after\n"
	  "                   it read as one invalid packet, decoding goes on)\n", NULL },
	{ "stats", O_STATS, CLI_NOARG, "  --stats          print packet counts instead of packets\n", NULL },
	{ "format", O_FORMAT, CLI_ARG, "  --format FMT     text (default) or json (with --stats)\n", NULL },
	{ "help", 'h', CLI_NOARG, "  -h, --help       this help\n", NULL },
	{ 0 },
};

static const struct cli_cmd dump_cmd = {
	"pt dump",
	"Usage: btr pt dump [OPTIONS] FILE\n"
	"Print the Intel PT packets of FILE, one line per packet: the packet's\n"
	"offset in its stream (16 hex digits), its name and its payload\n"
	"(see docs/pt-dump.md).  FILE is a raw PT stream, a .btr trace or a\n"
	"perf.data file.\n"
	"\n"
	"Options:\n",
	dump_opts,
	"\n"
	"A bad packet prints '[OFFSET: error: bad packet]' and decoding resumes at\n"
	"the next PSB.  Exit status: 0 ok, 2 usage error, 3 runtime error (file\n"
	"unreadable, or the trace had bad or truncated packets: all packets are\n"
	"still printed, and stderr names the first error).\n",
	1, 1, "missing FILE", "too many arguments",
};

struct dump_opts {
	int no_sync, stats, json, raw;
	int64_t cpu, tid;         /* -1: all */
	unsigned errata;          /* BTR_PT_ERRATA_* */
};

/* One PT stream (per thread and CPU) being decoded. */
struct stream {
	uint32_t tid;
	int32_t cpu;
	uint64_t next_offset;     /* stream offset the next piece should start at */
	uint64_t start_offset;    /* where decoding (re)started */
	uint64_t nbytes;          /* bytes fed since then */
	int started;
	int synced_once;
	struct btr_pt_pkt_decoder d;
};

struct dump {
	const struct dump_opts *o;
	struct stream *s;
	size_t ns, cap;
	uint64_t errors, first_err_off, packets, bytes;
	const char *first_err_what;
	uint64_t count[BTR_PT__COUNT];
	size_t last;              /* index of the previous piece's stream + 1 (header lines) */
};

static void report_error(struct dump *dp, uint64_t off, const char *what)
{
	if (!dp->o->stats)
		printf("[%016" PRIx64 ": error: %s]\n", off, what);
	if (!dp->errors++) {
		dp->first_err_off = off;
		dp->first_err_what = what;
	}
}

/* Decodes what the stream's decoder holds until it needs more input. */
static void drain(struct dump *dp, struct stream *st)
{
	struct btr_pt_packet p;
	char text[128];

	for (;;) {
		int r = btr_pt_pkt_next(&st->d, &p);
		if (r > 0) {
			dp->packets++;
			dp->count[p.type]++;
			if (p.type == BTR_PT_PSB)
				st->synced_once = 1;
			if (!dp->o->stats) {
				int n = btr_pt_pkt_format(&p, text, sizeof(text));
				printf("%016" PRIx64 "  %s%s%s\n", p.offset, btr_pt_pkt_name(&p), n ? " " : "", text);
			}
			continue;
		}
		if (r == -BTR_ERR_BAD_PACKET) {
			report_error(dp, btr_pt_pkt_offset(&st->d), "bad packet");
			/* Resume at the next PSB; -BTR_ERR_EOS means it may come
			 * with the next piece (the search then goes on by itself). */
			if (btr_pt_pkt_sync_forward(&st->d) == 0)
				continue;
		}
		return;   /* EOS or AGAIN: the next piece continues */
	}
}

/* The stream ends: report a packet cut by the end of the data, or a stream
 * without any PSB. */
static void finish(struct dump *dp, struct stream *st)
{
	if (!st->started)
		return;
	if (st->d.syncing && !st->synced_once && !dp->o->no_sync) {
		if (st->nbytes)   /* an empty stream is no error */
			report_error(dp, st->start_offset, "no psb found");
	}
	else if (btr_pt_pkt_end(&st->d) == -BTR_ERR_TRUNCATED)
		report_error(dp, btr_pt_pkt_offset(&st->d), "truncated packet");
	st->started = 0;
}

/* Feeds the next piece of stream @st, which starts at stream offset @off. */
static void piece(struct dump *dp, struct stream *st, const uint8_t *buf, size_t len, uint64_t off)
{
	dp->bytes += len;
	if (st->started && off != st->next_offset) {
		/* A gap (lost data): the decoder state is useless now. */
		finish(dp, st);
		if (!dp->o->stats)
			printf("[%016" PRIx64 ": gap of %" PRId64 " bytes]\n", st->next_offset,
			       (int64_t)(off - st->next_offset));
	}
	if (!st->started) {
		btr_pt_pkt_init(&st->d, buf, len, off);
		btr_pt_pkt_set_errata(&st->d, dp->o->errata);
		st->started = 1;
		st->synced_once = 0;
		st->start_offset = off;
		st->nbytes = 0;
		if (!dp->o->no_sync) {
			int r = btr_pt_pkt_sync_forward(&st->d);
			uint64_t at = btr_pt_pkt_offset(&st->d);
			if (r == 0 && at != off && !dp->o->stats)
				printf("[%016" PRIx64 ": skipped 0x%" PRIx64 " bytes before the first psb]\n", off,
				       at - off);
		}
	} else {
		btr_pt_pkt_feed(&st->d, buf, len);
	}
	st->next_offset = off + len;
	st->nbytes += len;
	drain(dp, st);
}

static struct stream *find_stream(struct dump *dp, uint32_t tid, int32_t cpu)
{
	for (size_t i = 0; i < dp->ns; i++)
		if (dp->s[i].tid == tid && dp->s[i].cpu == cpu)
			return &dp->s[i];
	if (dp->ns == dp->cap) {
		size_t cap = dp->cap ? 2 * dp->cap : 8;
		struct stream *s = realloc(dp->s, cap * sizeof(*s));
		if (!s)
			return NULL;
		dp->s = s;
		dp->cap = cap;
	}
	memset(&dp->s[dp->ns], 0, sizeof(dp->s[0]));
	dp->s[dp->ns].tid = tid;
	dp->s[dp->ns].cpu = cpu;
	return &dp->s[dp->ns++];
}

static int dump_raw(struct dump *dp, const char *path, int fd)
{
	enum { PIECE = 1 << 20 };
	uint8_t *buf[2];
	uint64_t off = 0;
	int cur = 0, ret = EXIT_OK;
	struct stream *st = find_stream(dp, 0, -1);

	buf[0] = malloc(PIECE);
	buf[1] = malloc(PIECE);
	if (!buf[0] || !buf[1] || !st) {
		cli_error("out of memory");
		ret = EXIT_RUNTIME;
		goto out;
	}
	for (;;) {
		/* Two buffers alternate: the decoder keeps no pointer into the
		 * old one after btr_pt_pkt_feed, but a short read loop is
		 * simplest with a fresh buffer each time. */
		ssize_t n = read(fd, buf[cur], PIECE);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			cli_error("%s: %s", path, strerror(errno));
			ret = EXIT_RUNTIME;
			goto out;
		}
		if (n == 0)
			break;
		piece(dp, st, buf[cur], (size_t)n, off);
		off += (uint64_t)n;
		cur ^= 1;
	}
	finish(dp, st);
out:
	free(buf[0]);
	free(buf[1]);
	return ret;
}

static int dump_trace(struct dump *dp, const char *path)
{
	struct btr_trace_reader *r;
	struct btr_record rec;
	int err = btr_trace_reader_new(path, &r), ret = EXIT_OK;

	if (err < 0) {
		cli_error("%s: %s", path, btr_errstr(err));
		return EXIT_RUNTIME;
	}
	while ((err = btr_trace_read(r, &rec)) == 0 || err == -BTR_ERR_CHECKSUM) {
		if (err == -BTR_ERR_CHECKSUM) {
			/* the chunk is lost; its streams get a gap */
			if (!dp->o->stats)
				printf("[chunk at file offset 0x%" PRIx64 ": error: %s]\n", btr_trace_reader_offset(r),
				       btr_errstr(err));
			report_error(dp, btr_trace_reader_offset(r), "checksum mismatch");
			continue;
		}
		if (rec.type != BTR_REC_PT)
			continue;
		const struct btr_rec_data *d = &rec.u.data;
		if ((dp->o->cpu >= 0 && d->cpu != dp->o->cpu) || (dp->o->tid >= 0 && (int64_t)d->tid != dp->o->tid))
			continue;
		struct stream *st = find_stream(dp, d->tid, d->cpu);
		if (!st) {
			cli_error("out of memory");
			ret = EXIT_RUNTIME;
			break;
		}
		if (!dp->o->stats && ((size_t)(st - dp->s) + 1 != dp->last || !st->started))
			printf("# stream tid %u cpu %d\n", d->tid, d->cpu);
		dp->last = (size_t)(st - dp->s) + 1;
		piece(dp, st, d->data, d->size, d->stream_offset);
	}
	if (ret == EXIT_OK && err != -BTR_ERR_EOS) {
		cli_error("%s: %s at file offset 0x%" PRIx64, path, btr_errstr(err), btr_trace_reader_offset(r));
		ret = EXIT_RUNTIME;
	}
	for (size_t i = 0; i < dp->ns; i++)
		finish(dp, &dp->s[i]);
	btr_trace_reader_free(r);
	return ret;
}

static void print_stats(const struct dump *dp)
{
	if (dp->o->json) {
		printf("{\"bytes\": %" PRIu64 ", \"packets\": %" PRIu64 ", \"errors\": %" PRIu64 ", \"streams\": %zu, "
		       "\"by_type\": {", dp->bytes, dp->packets, dp->errors, dp->ns);
		int first = 1;
		for (int t = 1; t < BTR_PT__COUNT; t++)
			if (dp->count[t]) {
				printf("%s\"%s\": %" PRIu64, first ? "" : ", ", btr_pt_type_name(t), dp->count[t]);
				first = 0;
			}
		printf("}}\n");
		return;
	}
	printf("bytes    %" PRIu64 "\npackets  %" PRIu64 "\nerrors   %" PRIu64 "\nstreams  %zu\n", dp->bytes,
	       dp->packets, dp->errors, dp->ns);
	for (int t = 1; t < BTR_PT__COUNT; t++)
		if (dp->count[t])
			printf("  %-10s %" PRIu64 "\n", btr_pt_type_name(t), dp->count[t]);
}

static int dump_opt(void *ctx, int key, char *arg)
{
	struct dump_opts *o = ctx;
	const char *cmd = "pt dump";
	uint64_t v;
	switch (key) {
	case O_NOSYNC: o->no_sync = 1; break;
	case O_STATS: o->stats = 1; break;
	case O_CPU:
		if (cli_parse_u64(arg, &v) || v > INT32_MAX)
			return cli_usage_error(cmd, "bad --cpu '%s'", arg);
		o->cpu = (int64_t)v;
		break;
	case O_TID:
		if (cli_parse_u64(arg, &v) || v > UINT32_MAX)
			return cli_usage_error(cmd, "bad --tid '%s'", arg);
		o->tid = (int64_t)v;
		break;
	case O_ERRATA: {
		/* the flow decoder's table says which errata the CPU has */
		struct btr_ptflow_config fc = { .sz = sizeof(fc) };
		unsigned fa = 0, mo = 0, stp = 0;
		char names[128], tail = 0;
		int k = sscanf(arg, "%i/%i%c", (int *)&fa, (int *)&mo, &tail);
		if (k == 3 && tail == '/')
			k = sscanf(arg, "%i/%i/%i", (int *)&fa, (int *)&mo, (int *)&stp) == 3 ? 2 : 0;
		if (k != 2 || fa > 0xffff || mo > 0xff || stp > 0xff)
			return cli_usage_error(cmd, "--errata-cpu needs FAMILY/MODEL[/STEPPING], got '%s'", arg);
		fc.cpu_family = (uint16_t)fa;
		fc.cpu_model = (uint16_t)mo;
		fc.cpu_stepping = (uint16_t)stp;
		o->errata = 0;
		if (btr_ptflow_errata_names(&fc, names, sizeof(names)) >= 0) {
			if (strstr(names, "skd007"))
				o->errata |= BTR_PT_ERRATA_SKD007;
			if (strstr(names, "skz84"))
				o->errata |= BTR_PT_ERRATA_SKZ84;
		}
		break;
	}
	case O_FORMAT:
		return cli_format_text_json(cmd, arg, &o->json, "unknown format '%s' (text or json)");
	case O_RAW:
		o->raw = 1;
		break;
	}
	return EXIT_OK;
}

static int pt_dump(int argc, char **argv)
{
	const char *cmd = "pt dump";
	struct dump_opts o = { .cpu = -1, .tid = -1 };
	struct dump dp = { .o = &o };
	int ret, first;
	int prc = cli_cmd_parse(&dump_cmd, argc, argv, NULL, dump_opt, &o, &first);
	if (prc != EXIT_OK)
		return prc == CLI_CMD_DONE ? EXIT_OK : prc;
	int raw = o.raw;
	if (o.json && !o.stats)
		return cli_usage_error(cmd, "--format json needs --stats (packets are printed as text)");

	const char *path = argv[first];
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		cli_error("%s: %s", path, strerror(errno));
		return EXIT_RUNTIME;
	}
	struct stat sb;
	if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		cli_error("%s: %s", path, btr_errstr(-BTR_ERR_ISDIR));
		close(fd);
		return EXIT_RUNTIME;
	}
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0) {
		cli_error("%s: empty file", path);
		close(fd);
		return EXIT_RUNTIME;
	}
	char magic[8] = { 0 };
	ssize_t n = pread(fd, magic, sizeof(magic), 0);
	if (n < 0) {
		cli_error("%s: %s", path, strerror(errno));
		close(fd);
		return EXIT_RUNTIME;
	}
	static char obuf[1 << 16];
	setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));
	if (!raw && n == 8 && btr_file_kind(magic, 8) != BTR_FILE_OTHER) {
		close(fd);
		ret = dump_trace(&dp, path);
	} else {
		ret = dump_raw(&dp, path, fd);
		close(fd);
	}
	if (o.stats)
		print_stats(&dp);
	fflush(stdout);
	free(dp.s);
	if (ret == EXIT_OK && dp.errors) {
		cli_error("%s: %" PRIu64 " decode error%s, the first at offset 0x%" PRIx64 " (%s)", path, dp.errors,
			  dp.errors > 1 ? "s" : "", dp.first_err_off, dp.first_err_what);
		ret = EXIT_RUNTIME;
	}
	return ret;
}

int cmd_pt(int argc, char **argv)
{
	if (argc < 2) {
		pt_usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		pt_usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "dump"))
		return pt_dump(argc - 1, argv + 1);
	if (!strcmp(argv[1], "decode"))
		return cmd_pt_decode(argc - 1, argv + 1);
	return cli_usage_error("pt", "unknown subcommand '%s' (dump or decode)", argv[1]);
}
