/* cmd_pt_decode.c - `btr pt decode`: Intel PT packets + code -> the
 * executed instructions / branches (docs/pt-decode.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_cmd.h"

#define BTR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#include "btr/image.h"
#include "btr/insn.h"
#include "btr/perfdata.h"
#include "btr/ptflow.h"
#include "btr/stream.h"


enum { O_ELF = 256, O_RAW, O_CPU, O_NORET, O_FILTER, O_INSN, O_BRANCHES, O_STAT, O_DISASM,
       O_FORMAT, O_MTC, O_CPUID15, O_BFILTER };

/* --pid and --tid are the stream options' (cli_stream_opt: one parser,
 * one meaning: select a process / thread). */
static const struct cli_opt opts[] = {
	{ "elf", O_ELF, CLI_ARG,
	  "Code image:\n"
	  "  --elf FILE[:BASE]          an ELF file (BASE: load bias for PIE / shared objects)\n", NULL },
	{ "raw", O_RAW, CLI_ARG, "  --raw FILE[:FROM[-TO]]:BASE  bytes FROM..TO of FILE (default: all) at address BASE\n", NULL },
	{ "cpu", O_CPU, CLI_ARG,
	  "Configuration:\n"
	  "  --cpu F/M/S                CPU family/model[/stepping] (decimal or 0x): apply the\n"
	  "                             errata libipt applies to it (docs/pt-decode.md)\n", NULL },
	{ "no-retcomp", O_NORET, CLI_NOARG, "  --no-retcomp               return compression was disabled\n", NULL },
	{ "ip-filter", O_FILTER, CLI_ARG, "  --ip-filter START-END      an IP filter range that was configured (up to 4)\n", NULL },
	{ "mtc-freq", O_MTC, CLI_ARG, "  --mtc-freq N               IA32_RTIT_CTL.MTCFreq (default 3)\n", NULL },
	{ "cpuid15", O_CPUID15, CLI_ARG, "  --cpuid15 EAX/EBX          CPUID 0x15 TSC/crystal ratio (MTC timestamps)\n", NULL },
	{ "branches", O_BRANCHES, CLI_NOARG,
	  "Output (one of):\n"
	  "  --branches                 'FROM -> TO KIND' per branch (default)\n", NULL },
	{ "insn", O_INSN, CLI_NOARG, "  --insn [--disasm]          one executed instruction per line: 16 hex digits\n"
	  "                             (then \" ?\" if it ran in a TSX transaction)\n", NULL },
	{ "disasm", O_DISASM, CLI_NOARG, NULL, NULL },
	{ "stat", O_STAT, CLI_NOARG, "  --stat [--format json]     only counts and decode time\n", NULL },
	{ "format", O_FORMAT, CLI_ARG, NULL, NULL },
	{ "filter", O_BFILTER, CLI_ARG,
	  "  --filter EXPR              with --branches: print only branches matching EXPR\n"
	  "                             (jcc,near_ret,user,...: docs/branch-kinds.md)\n", NULL },
	{ "jobs", 'j', CLI_ARG, "  -j, --jobs N               decode a raw PT stream in N threads, split at PSBs\n                             (not with --insn; a trace file: one thread)\n", NULL },
	{ "pid", CLI_OPT_PID, CLI_ARG, "  --pid PID, --tid TID       .btr / perf.data: only process PID / thread TID\n", NULL },
	{ "tid", CLI_OPT_TID, CLI_ARG, NULL, NULL },
	{ "help", 'h', CLI_NOARG,
	  "Event lines ([enable ...], [disable ...], [gap ...], [overflow ...]) start with '['.\n"
	  "  -h, --help                 this help\n", NULL },
	{ 0 },
};

static const struct cli_cmd cmd = {
	"pt decode",
	"Usage: btr pt decode RAW [OPTIONS]\n"
	"Reconstruct the executed instructions and branches from Intel PT data.\n"
	"RAW is a raw PT stream, a .btr trace (its module map gives the code; lines of\n"
	"a new thread are preceded by '[thread TID]'), or a perf.data file with\n"
	"Intel PT AUX data.\n\n",
	opts,
	NULL,
	1, 1, "missing RAW file", "too many arguments",
};

struct out_ctx {
	FILE *f;
	struct btr_image *img;
	int disasm;
	const struct btr_filter *filter;   /* --filter on raw PT (no stream), NULL: all */
};

static int print_branch(void *ctx, const struct btr_branch *b)
{
	struct out_ctx *o = ctx;
	if (o->filter && !btr_filter_match(o->filter, b))
		return 0;
	fprintf(o->f, "0x%" PRIx64 " -> 0x%" PRIx64 " %s%s\n", b->from, b->to,
		btr_branch_kind_name((enum btr_branch_kind)b->kind),
		(b->flags & BTR_BF_TAKEN) ? "" : " not-taken");
	return 0;
}

static int print_insn(void *ctx, uint64_t ip, const struct btr_insn *in)
{
	struct out_ctx *o = ctx;
	/* " ?" after the address: ran inside a TSX transaction (ptxed's "? ") */
	const char *tx = (in->flags & BTR_INSN_IN_TX) ? " ?" : "";
	if (!o->disasm) {
		fprintf(o->f, "%016" PRIx64 "%s\n", ip, tx);
		return 0;
	}
	uint8_t bytes[16];
	char text[128] = "?";
	int n = btr_image_read(o->img, ip, bytes, in->len ? in->len : sizeof(bytes));
	if (n > 0)
		btr_insn_format(bytes, (size_t)n, ip, BTR_MODE_64, text, sizeof(text));
	fprintf(o->f, "%016" PRIx64 "%s  %s\n", ip, tx, text);
	return 0;
}

static int print_event(void *ctx, const struct btr_flow_event *ev)
{
	struct out_ctx *o = ctx;
	switch (ev->type) {
	case BTR_FLOW_GAP:
		fprintf(o->f, "[gap at offset 0x%" PRIx64 ": %s]\n", ev->offset, btr_errstr(ev->reason));
		break;
	case BTR_FLOW_OVERFLOW:
		fprintf(o->f, "[overflow at offset 0x%" PRIx64 "]\n", ev->offset);
		break;
	case BTR_FLOW_ASYNC:
		break;  /* the branch line shows it */
	case BTR_FLOW_PAGING:
	case BTR_FLOW_PTWRITE:
		fprintf(o->f, "[%s 0x%" PRIx64 "]\n", btr_flow_event_name(ev->type), ev->payload);
		break;
	case BTR_FLOW_MODE:
		fprintf(o->f, "[mode %s]\n", ev->payload == BTR_MODE_64 ? "64" : ev->payload == BTR_MODE_32 ? "32" : "16");
		break;
	case BTR_FLOW_TSX:
		fprintf(o->f, "[tsx-%s 0x%" PRIx64 "]\n", ev->payload ? "begin" : "commit", ev->ip);
		break;
	case BTR_FLOW_TRIG:
		fprintf(o->f, "[trig 0x%02x%s", (unsigned)(ev->payload & 0xff), ev->payload & 0x100 ? ", mult" : "");
		if (ev->payload & 0x200)
			fprintf(o->f, ", icnt %u", (unsigned)(ev->payload >> 16));
		fprintf(o->f, "]\n");
		break;
	case BTR_FLOW_CFE:
		fprintf(o->f, "[cfe type %u, vector 0x%02x%s]\n", (unsigned)(ev->payload & 0xff),
			(unsigned)((ev->payload >> 8) & 0xff), ev->payload >> 16 ? ", ip" : "");
		break;
	case BTR_FLOW_EVD:
		fprintf(o->f, "[evd type %d: 0x%" PRIx64 "]\n", ev->reason, ev->payload);
		break;
	default:
		fprintf(o->f, "[%s 0x%" PRIx64 "]\n", btr_flow_event_name(ev->type), ev->ip);
		break;
	}
	return 0;
}

/* Splits "A:B" at the last ':' whose right side is a number. */
static char *split_num(char *s, uint64_t *v)
{
	char *c = strrchr(s, ':');
	if (!c || c == s)
		return NULL;
	if (cli_parse_u64(c + 1, v))
		return NULL;
	*c = 0;
	return c + 1;
}

static int parse_range(const char *s, uint64_t *a, uint64_t *b)
{
	char tmp[128];
	snprintf(tmp, sizeof(tmp), "%s", s);
	char *d = strchr(tmp, '-');
	if (!d)
		return -1;
	*d = 0;
	return cli_parse_u64(tmp, a) || cli_parse_u64(d + 1, b) || *b < *a ? -1 : 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* perf.data: one decoder per CPU (or thread) stream. */
struct pstream {
	int32_t cpu;
	uint32_t tid;
	uint64_t next_off;   /* stream offset the next AUX chunk should have */
	struct btr_ptflow *f;
};

static int decode_perf(const char *path, struct btr_image *img, struct btr_ptflow_config *cfg,
		       const struct btr_ptflow_callbacks *cb, struct btr_ptflow_stats *tot, int have_cpu)
{
	struct btr_perf_reader *r;
	int e = btr_perf_reader_new(path, &r);
	if (e) {
		cli_error("%s: %s", path, btr_errstr(e));
		return EXIT_RUNTIME;
	}
	struct pstream ps[256];
	unsigned nps = 0;
	struct btr_record rec;
	int ret = EXIT_OK;
	while ((e = btr_perf_read(r, &rec)) == 0) {
		if (rec.type == BTR_REC_MACHINE) {
			const struct btr_rec_machine *m = &rec.u.machine;
			if (!have_cpu) {
				cfg->cpu_family = m->cpu_family;
				cfg->cpu_model = m->cpu_model;
				cfg->cpu_stepping = m->cpu_stepping;
			}
			if (m->mtc_freq)
				cfg->mtc_freq = m->mtc_freq;
			if (m->cpuid15_eax) {
				cfg->cpuid15_eax = m->cpuid15_eax;
				cfg->cpuid15_ebx = m->cpuid15_ebx;
			}
			if (m->nom_freq)
				cfg->nom_freq = m->nom_freq;
		} else if (rec.type == BTR_REC_MODULE_LOAD || rec.type == BTR_REC_EXEC) {
			const struct btr_rec_module *m = &rec.u.module;
			/* Add the file if it is here (the recording machine's
			 * binaries are often missing: their code is then a gap). */
			if (m->path && m->path[0] == '/' && (m->prot & 4) && access(m->path, R_OK) == 0)
				btr_image_add_file(img, m->path, m->pgoff, m->size, m->start);
		} else if (rec.type == BTR_REC_PT) {
			const struct btr_rec_data *d = &rec.u.data;
			unsigned k;
			for (k = 0; k < nps; k++)
				if (ps[k].cpu == d->cpu && (d->cpu >= 0 || ps[k].tid == d->tid))
					break;
			if (k == nps) {
				if (nps == sizeof(ps) / sizeof(ps[0]))
					continue;
				cfg->tid = d->tid;
				if (btr_ptflow_new(img, cfg, &ps[k].f)) {
					ret = EXIT_RUNTIME;
					cli_error("out of memory");
					break;
				}
				ps[k].cpu = d->cpu;
				ps[k].tid = d->tid;
				ps[k].next_off = d->stream_offset;
				nps++;
			}
			if (d->stream_offset != ps[k].next_off)
				btr_ptflow_reset(ps[k].f, d->stream_offset);  /* a hole in the AUX data */
			ps[k].next_off = d->stream_offset + d->size;
			btr_ptflow_decode(ps[k].f, d->data, d->size, cb);
		}
	}
	if (e != -BTR_ERR_EOS && ret == EXIT_OK) {
		cli_error("%s: %s at offset 0x%" PRIx64, path, btr_errstr(e), btr_perf_reader_offset(r));
		ret = EXIT_RUNTIME;
	}
	for (unsigned k = 0; k < nps; k++) {
		struct btr_ptflow_stats st;
		btr_ptflow_stats(ps[k].f, &st);
		tot->insns += st.insns;
		tot->branches += st.branches;
		tot->gaps += st.gaps;
		tot->bytes += st.bytes;
		tot->overflows += st.overflows;
		tot->blocks_decoded += st.blocks_decoded;
		tot->tsx_aborts += st.tsx_aborts;
		tot->tsx_aborted_insns += st.tsx_aborted_insns;
		for (int i = 0; i < BTR_KIND__COUNT; i++)
			tot->by_kind[i] += st.by_kind[i];
		btr_ptflow_free(ps[k].f);
	}
	btr_perf_reader_free(r);
	return ret;
}

/* .btr traces: the common branch stream (lib/stream/stream.c) places the recorded
 * modules and runs one flow decoder per thread, the same decoding that
 * `btr report` uses; this command only prints what it delivers. */
struct btr_ctx {
	struct out_ctx *o;
	struct btr_ptflow_stats *st;
	int mode;          /* 0 branches, 1 insn, 2 stat */
	uint32_t last_tid;
	int any;
	struct btr_stream *s;
};

static void btr_thread_mark(struct btr_ctx *c, uint32_t tid)
{
	if (c->mode != 2 && (!c->any || tid != c->last_tid))
		fprintf(c->o->f, "[thread %" PRIu32 "]\n", tid);
	c->any = 1;
	c->last_tid = tid;
}

static int btr_branch_cb(void *ctx, const struct btr_branch *b)
{
	struct btr_ctx *c = ctx;
	c->st->branches++;
	if (b->kind < BTR_KIND__COUNT)
		c->st->by_kind[b->kind]++;
	if (b->flags & BTR_BF_INSNS)
		c->st->insns += b->insns;
	if (c->mode == 0) {
		btr_thread_mark(c, b->tid);
		return print_branch(c->o, b);
	}
	return 0;
}

/* --stat: the stream's batches, counted in one loop each. */
/* --stat of a .btr: the instructions in the upper half of the address
 * space (the kernel's, on x86-64 Linux: whole-system traces). */
#define UPPER_HALF 0xffff800000000000ull
static uint64_t stat_upper;
static int stat_split;

static int btr_branches_stat_cb(void *ctx, const struct btr_branch *b, size_t n)
{
	struct btr_ctx *c = ctx;
	struct btr_ptflow_stats *st = c->st;
	uint64_t insns = 0;
	/* Four sets of counters, used in turn: most records are of one kind,
	 * and incrementing one counter in memory for each would be a chain
	 * of store-to-load forwards (about 1 ns a record). */
	uint32_t k4[4][BTR_KIND__COUNT + 1];
	memset(k4, 0, sizeof(k4));
	uint64_t upper = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned k = b[i].kind < BTR_KIND__COUNT ? b[i].kind : BTR_KIND__COUNT;
		k4[i & 3][k]++;
		uint64_t m = (b[i].flags & BTR_BF_INSNS) ? b[i].insns : 0;
		insns += m;
		/* a branch's instructions ran straight up to it: one half */
		upper += b[i].from >= UPPER_HALF ? m : 0;
	}
	stat_upper += upper;
	for (unsigned k = 0; k < BTR_KIND__COUNT; k++)
		st->by_kind[k] += (uint64_t)k4[0][k] + k4[1][k] + k4[2][k] + k4[3][k];
	st->branches += n;
	st->insns += insns;
	return 0;
}

static int btr_insn_cb(void *ctx, uint32_t tid, uint64_t ip, const struct btr_insn *in)
{
	struct btr_ctx *c = ctx;
	btr_thread_mark(c, tid);
	if (c->s)   /* each process has its own image */
		c->o->img = btr_stream_image_pid(c->s, btr_stream_pid_of(c->s, tid));
	return print_insn(c->o, ip, in);
}

static int btr_event_cb(void *ctx, const struct btr_stream_event *ev)
{
	struct btr_ctx *c = ctx;
	if (ev->type == BTR_SEV_GAP) {
		c->st->gaps++;
		if (c->mode != 2) {
			btr_thread_mark(c, ev->tid);
			fprintf(c->o->f, "[gap at offset 0x%" PRIx64 ": %s]\n", ev->offset, btr_errstr(ev->reason));
		}
	} else if (ev->type == BTR_SEV_FLOW && ev->flow) {
		if (ev->flow->type == BTR_FLOW_GAP || ev->flow->type == BTR_FLOW_OVERFLOW)
			c->st->gaps++;
		if (ev->flow->type == BTR_FLOW_OVERFLOW)
			c->st->overflows++;
		if (c->mode != 2) {
			btr_thread_mark(c, ev->tid);
			print_event(c->o, ev->flow);
		}
	}
	return 0;
}

/* .btr and perf.data input through the common branch stream: the stream
 * selects the process, thread and branches (@filter) as for every other
 * command. */
static int decode_btr(const char *path, const struct btr_stream_elf *elfs, unsigned n_elfs, uint32_t pid, uint32_t tid,
		      const struct btr_filter *filter, struct out_ctx *o, int mode, struct btr_ptflow_stats *st)
{
	struct btr_ctx c = { .o = o, .st = st, .mode = mode == 0 ? 0 : mode };
	struct btr_stream_opts so = { .sz = sizeof(so), .elfs = elfs, .n_elfs = n_elfs, .pid = pid, .tid = tid, .filter = filter,
				      .branch = btr_branch_cb, .event = btr_event_cb, .ctx = &c };
	struct btr_stream *s;
	if (mode == 1)
		so.insn = btr_insn_cb;
	if (mode == 2) {
		so.branch = NULL;
		so.branches = btr_branches_stat_cb;
	}
	int e = btr_stream_open(path, &so, &s);
	if (e < 0) {
		cli_error("%s: %s", path, btr_errstr(e));
		return EXIT_RUNTIME;
	}
	c.s = s;
	e = btr_stream_run(s);
	struct btr_stream_stats ss;
	btr_stream_get_stats(s, &ss);
	st->bytes = ss.pt_bytes;
	st->blocks_decoded = ss.pt_blocks;
	int lost = cli_stream_losses(path, "decoding", s);
	btr_stream_free(s);
	if (lost)
		return EXIT_RUNTIME;
	if (e < 0) {
		cli_error("%s: %s (everything before the damage was decoded)", path,
			  btr_errstr(e < 0 ? e : ss.read_error ? ss.read_error : -BTR_ERR_CHECKSUM));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* What the options say. */
struct dec {
	struct btr_ptflow_config cfg;
	struct btr_image *img;
	int mode, disasm, json, have_cpu, have_bfilter;
	struct btr_filter bfilter;
	struct btr_stream_elf elfs[64];   /* --elf again, for .btr input */
	char *elf_paths[64];
	unsigned n_elfs;
	unsigned jobs;
	struct cli_stream sel;            /* --pid, --tid */
};

static int dec_opt(void *ctx, int key, char *arg)
{
	struct dec *d = ctx;
	const char *cmd = "pt decode";
	switch (key) {
	case O_ELF: {
		char *s = strdup(arg);
		uint64_t base = 0;
		if (!s)
			goto nomem;
		if (access(s, F_OK) != 0)
			split_num(s, &base);
		int e = btr_image_add_elf(d->img, s, base, 0);
		if (e) {
			cli_error("%s: %s", s, btr_errstr(e));
			free(s);
			return EXIT_RUNTIME;
		}
		if (d->n_elfs == BTR_ARRAY_LEN(d->elfs)) {
			free(s);
			return cli_usage_error(cmd, "too many --elf options (at most %zu)", BTR_ARRAY_LEN(d->elfs));
		}
		d->elf_paths[d->n_elfs] = s;
		d->elfs[d->n_elfs] = (struct btr_stream_elf){ .path = s, .base = base, .has_base = strcmp(s, arg) != 0 };
		d->n_elfs++;
		break;
	}
	case O_RAW: {
		char *s = strdup(arg);
		uint64_t base, from = 0, to = 0;
		if (!s)
			goto nomem;
		if (!split_num(s, &base)) {
			free(s);
			return cli_usage_error(cmd, "--raw needs FILE[:FROM[-TO]]:BASE, got '%s'", arg);
		}
		if (access(s, F_OK) != 0) {
			char *r = strrchr(s, ':');
			if (r) {
				*r++ = 0;
				if (strchr(r, '-') ? parse_range(r, &from, &to) : cli_parse_u64(r, &from)) {
					free(s);
					return cli_usage_error(cmd, "bad range in --raw '%s'", arg);
				}
			}
		}
		int e = btr_image_add_file(d->img, s, from, to > from ? to - from : 0, base);
		if (e) {
			cli_error("%s: %s", s, btr_errstr(e));
			free(s);
			return EXIT_RUNTIME;
		}
		free(s);
		break;
	}
	case O_CPU: {
		unsigned fa, mo, st = 0;
		if (sscanf(arg, "%u/%u/%u", &fa, &mo, &st) < 2)
			return cli_usage_error(cmd, "--cpu needs FAMILY/MODEL[/STEPPING], got '%s'", arg);
		d->cfg.cpu_family = (uint16_t)fa;
		d->cfg.cpu_model = (uint16_t)mo;
		d->cfg.cpu_stepping = (uint16_t)st;
		d->have_cpu = 1;
		break;
	}
	case O_NORET:
		d->cfg.no_retcomp = 1;
		break;
	case O_FILTER:
		if (d->cfg.n_ip_filter == 4 ||
		    parse_range(arg, &d->cfg.ip_filter[d->cfg.n_ip_filter][0], &d->cfg.ip_filter[d->cfg.n_ip_filter][1]))
			return cli_usage_error(cmd, "bad --ip-filter '%s' (START-END, at most 4)", arg);
		d->cfg.n_ip_filter++;
		break;
	case O_INSN: case O_BRANCHES: case O_STAT:
		d->mode = key;
		break;
	case O_DISASM:
		d->disasm = 1;
		break;
	case O_FORMAT:
		return cli_format_text_json(cmd, arg, &d->json, "unknown --format '%s' (text, json)");
	case O_MTC: {
		uint64_t v;
		if (cli_parse_u64(arg, &v) || v > 15)
			return cli_usage_error(cmd, "bad --mtc-freq '%s'", arg);
		d->cfg.mtc_freq = (uint8_t)v;
		break;
	}
	case CLI_OPT_PID:
	case CLI_OPT_TID:
		return cli_stream_opt(&d->sel, cmd, key, arg) < 0 ? EXIT_USAGE : EXIT_OK;
	case O_BFILTER:
		if (btr_filter_parse(arg, &d->bfilter))
			return cli_usage_error(cmd, "bad --filter '%s' (terms: docs/branch-kinds.md)", arg);
		d->have_bfilter = 1;
		break;
	case O_CPUID15: {
		unsigned a, b;
		if (sscanf(arg, "%u/%u", &a, &b) != 2 || !a)
			return cli_usage_error(cmd, "--cpuid15 needs EAX/EBX, got '%s'", arg);
		d->cfg.cpuid15_eax = a;
		d->cfg.cpuid15_ebx = b;
		break;
	}
	case 'j': {
		uint64_t v;
		if (cli_parse_u64(arg, &v) || !v || v > 64)
			return cli_usage_error(cmd, "bad -j '%s' (1..64)", arg);
		d->jobs = (unsigned)v;
		break;
	}
	case CLI_OPT_END:
		if (d->have_bfilter && d->mode != O_BRANCHES)
			return cli_usage_error(cmd, "--filter goes with --branches");
		if (d->disasm && d->mode != O_INSN)
			return cli_usage_error(cmd, "--disasm needs --insn");
		break;
	}
	return EXIT_OK;
nomem:
	cli_error("out of memory");
	return EXIT_RUNTIME;
}

int cmd_pt_decode(int argc, char **argv)
{
	static struct dec d;   /* large: its arrays */
	memset(&d, 0, sizeof(d));
	d.cfg.sz = sizeof(d.cfg);
	d.mode = O_BRANCHES;
	d.jobs = 1;
	cli_stream_init(&d.sel);
	int ret = EXIT_OK, first;

	if (btr_image_new(&d.img)) {
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	int prc = cli_cmd_parse(&cmd, argc, argv, NULL, dec_opt, &d, &first);
	struct btr_ptflow_config cfg = d.cfg;
	struct btr_image *img = d.img;
	int mode = d.mode, disasm = d.disasm, json = d.json, have_cpu = d.have_cpu;
	const struct btr_filter *bfilter = d.have_bfilter ? &d.bfilter : NULL;
	unsigned jobs = d.jobs;
	uint32_t sel_pid = d.sel.so.pid, sel_tid = d.sel.so.tid;
	if (prc != EXIT_OK) {
		ret = prc == CLI_CMD_DONE ? EXIT_OK : prc;
		goto out;
	}
	const char *path = argv[first];
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		cli_error("%s: %s", path, strerror(errno));
		ret = EXIT_RUNTIME;
		goto out;
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		cli_error("%s: %s", path, strerror(errno));
		close(fd);
		ret = EXIT_RUNTIME;
		goto out;
	}
	if (S_ISDIR(sb.st_mode)) {
		cli_error("%s: %s", path, btr_errstr(-BTR_ERR_ISDIR));
		close(fd);
		ret = EXIT_RUNTIME;
		goto out;
	}
	size_t size = (size_t)sb.st_size;
	const uint8_t *buf = NULL;
	if (size) {
		buf = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (buf == MAP_FAILED) {
			cli_error("%s: %s", path, strerror(errno));
			close(fd);
			ret = EXIT_RUNTIME;
			goto out;
		}
	}
	close(fd);

	static char obuf[1 << 16];
	setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));
	struct out_ctx oc = { .f = stdout, .img = img, .disasm = disasm, .filter = bfilter };
	struct btr_ptflow_callbacks cb = { .event = print_event, .ctx = &oc };
	if (mode == O_BRANCHES)
		cb.branch = print_branch;
	if (mode == O_INSN)
		cb.insn = print_insn;
	if (mode == O_STAT)
		cb.event = NULL;

	struct btr_ptflow_stats st = { 0 };
	double t0 = now_s();
	enum btr_file_kind kind = btr_file_kind(buf, size);
	int is_btr = kind == BTR_FILE_BTR;
	int is_perf = kind == BTR_FILE_PERF;
	if (!is_btr && !is_perf && (sel_pid || sel_tid)) {
		ret = cli_usage_error("pt decode", "--pid/--tid need a .btr or perf.data trace");
	} else if (is_btr || (is_perf && (sel_pid || sel_tid))) {
		if (jobs > 1)
			cli_warn("%s: -j applies to a raw PT stream; a trace file is decoded in one thread", path);
		/* perf.data through the stream too when a process or thread is
		 * selected: the stream knows which thread is whose. */
		oc.filter = NULL;   /* the stream applies it */
		stat_split = 1;
		ret = decode_btr(path, d.elfs, d.n_elfs, sel_pid, sel_tid, bfilter, &oc,
				 mode == O_BRANCHES ? 0 : mode == O_INSN ? 1 : 2, &st);
	} else if (is_perf) {
		if (jobs > 1)
			cli_warn("%s: -j applies to a raw PT stream; a trace file is decoded in one thread", path);
		ret = decode_perf(path, img, &cfg, &cb, &st, have_cpu);
	} else if (!memmem(buf ? buf : (const uint8_t *)"", size, BTR_PT_PSB_PATTERN, BTR_PT_PSB_SIZE)) {
		/* Raw PT decoding starts at a PSB; without one nothing can be
		 * decoded, which is a wrong input, not an empty trace. */
		cli_error("%s: %s", path, size ? "no PSB packet found: not Intel PT data" : "empty file");
		ret = EXIT_RUNTIME;
	} else if (jobs > 1 && mode != O_INSN) {
		int e = btr_ptflow_decode_parallel(img, &cfg, buf, size, jobs, 0, &cb, &st);
		if (e < 0) {
			cli_error("%s: %s", path, btr_errstr(e));
			ret = EXIT_RUNTIME;
		}
	} else {
		struct btr_ptflow *f;
		int e = btr_ptflow_new(img, &cfg, &f);
		if (!e) {
			e = btr_ptflow_decode(f, buf, size, &cb);
			btr_ptflow_stats(f, &st);
			btr_ptflow_free(f);
		}
		if (e < 0) {
			cli_error("%s: %s", path, btr_errstr(e));
			ret = EXIT_RUNTIME;
		}
	}
	double dt = now_s() - t0;
	if (buf)
		munmap((void *)buf, size);

	if (mode == O_STAT && ret == EXIT_OK) {
		char errata[128];
		btr_ptflow_errata_names(&cfg, errata, sizeof(errata));
		double mbs = dt > 0 ? (double)st.bytes / dt / 1e6 : 0;
		double nspb = st.branches ? dt * 1e9 / (double)st.branches : 0;
		if (json) {
			printf("{\"instructions\": %" PRIu64 ", \"branches\": %" PRIu64 ", \"branches_by_kind\": {",
			       st.insns, st.branches);
			int first = 1;
			for (int k = 1; k < BTR_KIND__COUNT; k++) {
				if (!st.by_kind[k])
					continue;
				printf("%s\"%s\": %" PRIu64, first ? "" : ", ", btr_branch_kind_name((enum btr_branch_kind)k), st.by_kind[k]);
				first = 0;
			}
			printf("}");
			if (stat_split)
				printf(", \"instructions_upper_half\": %" PRIu64, stat_upper);
			printf(", \"gaps\": %" PRIu64 ", \"overflows\": %" PRIu64 ", \"trace_bytes\": %" PRIu64
			       ", \"blocks_decoded\": %" PRIu64 ", \"decode_seconds\": %.6f, \"mb_per_s\": %.1f"
			       ", \"ns_per_branch\": %.2f, \"jobs\": %u, \"errata\": \"%s\""
			       ", \"tsx_aborts\": %" PRIu64 ", \"aborted_instructions\": %" PRIu64 "}\n",
			       st.gaps, st.overflows, st.bytes, st.blocks_decoded, dt, mbs, nspb, jobs, errata,
			       st.tsx_aborts, st.tsx_aborted_insns);
		} else {
			printf("instructions  %" PRIu64 "\n", st.insns);
			if (stat_split)
				printf("  upper half  %" PRIu64 " (kernel code)\n", stat_upper);
			printf("branches      %" PRIu64 "\n", st.branches);
			for (int k = 1; k < BTR_KIND__COUNT; k++)
				if (st.by_kind[k])
					printf("  %-11s %" PRIu64 "\n", btr_branch_kind_name((enum btr_branch_kind)k), st.by_kind[k]);
			printf("gaps          %" PRIu64 "\noverflows     %" PRIu64 "\ntrace bytes   %" PRIu64 "\n",
			       st.gaps, st.overflows, st.bytes);
			printf("blocks        %" PRIu64 "\n", st.blocks_decoded);
			if (st.tsx_aborts)
				printf("aborted       %" PRIu64 " instructions (%" PRIu64 " TSX transaction%s)\n",
				       st.tsx_aborted_insns, st.tsx_aborts, st.tsx_aborts > 1 ? "s" : "");
			printf("decode time   %.6f s (%.1f MB/s, %.2f ns/branch, %u job%s)\n",
			       dt, mbs, nspb, jobs, jobs > 1 ? "s" : "");
			if (errata[0])
				printf("errata        %s\n", errata);
		}
	}
	fflush(stdout);
out:
	for (unsigned i = 0; i < d.n_elfs; i++)
		free(d.elf_paths[i]);
	btr_image_free(img);
	return ret;
}
