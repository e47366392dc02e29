/* ptflow.c - Intel PT flow reconstruction.
 *
 * Design (see docs/pt-decode.md for the user-facing rules):
 *
 * - Packet driven.  Packets are parsed inline (the hot ones, TNT, TIP, PAD,
 *   MTC, CYC, first) and each packet moves the flow only as far as it
 *   proves execution went.  TNT bits go into a small FIFO and are consumed
 *   by walking blocks; a TIP resolves the indirect branch the walk stopped
 *   at (or walks to the next one); a FUP walks to its IP.  Because nothing
 *   is executed speculatively, the stream can arrive in pieces and no
 *   look-ahead is needed; a packet cut at a buffer end is carried over.
 *
 * - Block cache.  Each basic block is decoded once (Zydis, via btr_insn)
 *   into one cache line of a dense array (allocated in decode order; an
 *   index maps addresses to blocks): instruction count, the class of the
 *   ending instruction, its direct target and fall-through.  Every block
 *   also links to the blocks that followed it (taken and not taken), so
 *   the hot path is a pointer chase plus one compare, no hash.  The array
 *   never grows: when full it is dropped and refilled.
 *
 * - The hot loop (walk_fast) consumes TNT and TIP packets straight from
 *   the stream bytes while the flow is known, with its state in
 *   registers; the branch records go to the callback one by one or in
 *   batches (cb->branches).
 *
 * - Return compression keeps a 64-entry stack like the hardware's
 *   (SDM "Indirect Transfer Compression for Returns").  The hardware only
 *   compresses RETs whose CALL it saw since the last PSB, so the stack is
 *   cleared at every PSB; this is what makes parallel decoding from PSB
 *   boundaries exact.  Like libipt, an uncompressed RET does not pop.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "btr/ptflow.h"
#include "btr/error.h"
#include "internal.h"

/* ---- block cache ------------------------------------------------------ */

enum blk_class {
	C_NONE = 0,  /* block ends without a branch (length cap, or before an undecodable insn) */
	C_COND,      /* jcc, loop, jrcxz: one TNT bit */
	C_JMP,       /* direct jmp */
	C_CALL,      /* direct call */
	C_IND,       /* indirect jmp / call: TIP */
	C_RET,       /* near ret: TNT bit (compressed) or TIP */
	C_FAR,       /* far transfers, syscall, int, iret: TIP (or TIP.PGD) */
};

#define BLK_MAXI 32          /* instructions per block at most */
#define CACHE_BITS_DEFAULT 16 /* 64K blocks: 64 + 16 + 32 + 8 bytes each, 7.5 MiB */
#define WAYS 4               /* set-associative index: hot blocks that hash alike coexist */

/* One cache line per block, everything the hot loop reads: the walk
 * from block to block is a chain of dependent loads, so each step must
 * be one load (the link) plus the compare that validates it, which the
 * CPU predicts and takes off the chain.  Blocks are allocated in the
 * order they are first decoded (a bump allocator over a dense array),
 * so the blocks of one function sit next to each other; an index table
 * maps addresses to blocks for the lookups that links cannot serve
 * (TIP targets, returns).  Instruction lengths and the last
 * instruction's flags and immediate live in cold side arrays indexed
 * like the blocks. */
struct __attribute__((aligned(64))) blk {
	uint64_t ip;          /* first instruction (key) */
	struct blk *next[2];  /* the block at to[0] / to[1] when last followed, or
			       * anything else: valid only if its ip and mode match */
	uint64_t to[2];       /* [0] fall-through (ip + len), [1] direct target (0 if none) */
	uint64_t end_ip;      /* address of the last instruction */
	uint32_t tail[2];     /* branch record flags | kind << 16 for a branch to to[0] / to[1] */
	uint16_t len;         /* bytes from ip to the end of the last instruction */
	uint8_t ninsn;
	uint8_t end_len;      /* length of the last instruction */
	uint8_t cls;          /* enum blk_class */
	uint8_t kind;         /* enum btr_branch_kind of the last instruction */
	uint8_t mode;         /* enum btr_exec_mode + 1; 0 = not a valid block */
	uint8_t jcc;          /* cls == C_COND and kind == BTR_KIND_JCC (the hot case) */
};
_Static_assert(sizeof(struct blk) == 64, "one cache line per block");

/* Index entry: 4 per set, one cache line per set. */
struct blk_ref {
	uint64_t ip;
	uint32_t ref;         /* block number + 1; 0 = empty */
	uint32_t mode;        /* enum btr_exec_mode + 1 */
};

struct blk_cold {
	uint32_t end_flags;  /* BTR_INSN_* of the last instruction */
	uint16_t end_imm;
};

/* Links start here: mode 0 never validates, so the hot loop needs no
 * NULL test. */
static const struct blk blk_nil;
#define NIL ((struct blk *)&blk_nil)

/* The address after the block, and its last instruction's address. */
#define NEXT(b) ((b)->to[0])
#define END_IP(b) ((b)->end_ip)

/* ---- decoder state ---------------------------------------------------- */

enum en_state {
	EN_OFF = 0,   /* tracing disabled: wait for TIP.PGE or a PSB+ with FUP */
	EN_ON,        /* enabled and the IP is known */
	EN_LOST,      /* enabled but the IP is unknown (after a gap): resync at any IP packet */
};

struct errata {
	unsigned bdm70 : 1, bdm64 : 1, skd007 : 1, skd022 : 1, skd010 : 1, skl014 : 1,
		skl168 : 1, apl12 : 1, apl11 : 1;
};

#define TNTQ 8   /* TNT packets queued at most (deferred TIPs need 2) */
#define RETSTACK 64
#define WALK_LIMIT (1u << 20) /* blocks walked without trace before we call it a loop */

struct btr_ptflow {
	struct btr_image *img;
	struct btr_ptflow_config cfg;
	struct errata er;
	unsigned img_gen;

	struct blk *blks;     /* 2^cache_bits blocks, the first nblk in use */
	struct blk_ref *idx;  /* 2^cache_bits index entries in sets of WAYS */
	uint8_t *lens;        /* BLK_MAXI instruction lengths per block */
	struct blk_cold *cold;
	unsigned cache_bits;
	uint32_t nblk;        /* blocks allocated since the last flush */
	struct blk *cur;      /* the block at ip when a walk stopped (validated by ip/mode) */
	struct btr_branch *bbuf; /* batched branch records (cb->branches) */
	unsigned bn;
	/* Every record in bbuf has .tsc = bbuf_tsc, .tid = cfg.tid and
	 * .cycles = 0 unless bbuf_dirty (then the flush restores it): the
	 * hot loop writes only from, to, insns, flags and kind. */
	uint64_t bbuf_tsc;
	uint8_t bbuf_dirty;
	uint64_t fw_nonjcc;   /* walk_fast: TNT bits consumed by other than JCC */

	/* flow */
	uint64_t ip;
	uint8_t en;           /* enum en_state */
	uint8_t mode;         /* enum btr_exec_mode in effect */
	uint8_t next_mode;    /* MODE.Exec outside PSB+: applies after the next IP packet */
	uint8_t have_next_mode;
	struct blk *pend;     /* executed block whose ending branch waits for a TIP */
	struct blk pend_copy; /* pend may be evicted: keep the ending by value */
	uint8_t async_pending;   /* FUP seen: the next TIP/TIP.PGD is asynchronous from async_ip */
	uint8_t fup_status;      /* next FUP is a status FUP (PTW, MODE.TSX, EXSTOP): walk only */
	uint8_t tsx_abort;       /* MODE.TSX with abort seen: next FUP+TIP is an abort */
	uint8_t after_ovf;       /* OVF seen: the next FUP is the resume IP */
	uint8_t ovf_was_off;     /* tracing was off at the OVF (APL12) */
	uint8_t in_psb;
	uint8_t psb_fup;         /* FUP seen in this PSB+ */
	uint8_t synced;          /* a PSB was found */
	uint8_t stopped;         /* a callback asked to stop */
	uint8_t in_bbp;
	uint8_t pending_trunc_gap; /* btr_ptflow_reset while tracing: report the hole */
	uint8_t bbp_sz;
	uint64_t async_ip;
	uint64_t last_ip;        /* IP compression state */

	/* TNT FIFO: packets, each bits (oldest = bit n-1) */
	uint64_t tq_bits[TNTQ];
	uint8_t tq_n[TNTQ];
	unsigned tq_head, tq_cnt;
	unsigned tnt_total;

	/* return stack (ring); rsl: where the block at the return address
	 * is remembered (the link next[0] of the calling block, unused by
	 * calls otherwise), so that a compressed RET needs no lookup */
	uint64_t rs[RETSTACK];
	struct blk **rsl[RETSTACK];
	struct blk *rs_nolink;
	unsigned rs_top, rs_n;

	/* timing */
	uint64_t tsc;            /* current timestamp estimate, 0 = none */
	uint64_t tsc_pkt;        /* last TSC packet value */
	uint64_t art_base, art_now;
	uint8_t tma_ok;
	uint64_t cyc_acc;
	uint8_t have_cyc;

	/* position */
	uint64_t off;            /* stream offset of the current buffer start */
	uint64_t pkt_off;        /* stream offset of the packet being processed */
	uint8_t carry[32];
	unsigned carry_len;

	/* per-branch bookkeeping */
	uint64_t since;          /* instructions since the previous branch */

	const struct btr_ptflow_callbacks *cb;
	struct btr_ptflow_stats st;
};

const char *btr_flow_event_name(enum btr_flow_event_type t)
{
	static const char *const names[] = {
		[BTR_FLOW_ENABLE] = "enable", [BTR_FLOW_DISABLE] = "disable",
		[BTR_FLOW_GAP] = "gap", [BTR_FLOW_OVERFLOW] = "overflow",
		[BTR_FLOW_ASYNC] = "async", [BTR_FLOW_PAGING] = "paging",
		[BTR_FLOW_MODE] = "mode", [BTR_FLOW_TSX_ABORT] = "tsx-abort",
		[BTR_FLOW_PTWRITE] = "ptwrite", [BTR_FLOW_STOP] = "tracestop",
	};
	if ((unsigned)t < BTR_ARRAY_SIZE(names) && names[t])
		return names[t];
	return "?";
}

/* The errata libipt's pt_cpu_errata() (libipt 2.x, intel-pt.h) enables,
 * by family 6 model. */
static void errata_for(const struct btr_ptflow_config *c, struct errata *e)
{
	memset(e, 0, sizeof(*e));
	if (!c || (c->flags & BTR_PTFLOW_NO_ERRATA) || c->cpu_family != 6)
		return;
	switch (c->cpu_model) {
	case 0x3d: case 0x47: case 0x4f: case 0x56:   /* Broadwell */
		e->bdm70 = e->bdm64 = 1;
		break;
	case 0x4e: case 0x5e: case 0x8e: case 0x9e:   /* Skylake, Kaby Lake */
		e->bdm70 = e->skd007 = e->skd022 = e->skd010 = e->skl014 = e->skl168 = 1;
		break;
	case 0x55: case 0x66: case 0x7d: case 0x7e:   /* SKX, CNL, ICL */
		e->bdm70 = e->skl014 = e->skd022 = 1;
		break;
	case 0x5c: case 0x5f:                         /* Goldmont */
		e->apl12 = e->apl11 = 1;
		break;
	case 0x7a: case 0x86:                         /* Goldmont Plus, Tremont */
		e->apl11 = 1;
		break;
	}
}

int btr_ptflow_errata_names(const struct btr_ptflow_config *cfg, char *buf, size_t size)
{
	struct errata e;
	errata_for(cfg, &e);
	if (!buf || !size)
		return -BTR_ERR_INVAL;
	int n = snprintf(buf, size, "%s%s%s%s%s%s%s%s%s", e.bdm70 ? "bdm70 " : "",
			 e.bdm64 ? "bdm64 " : "", e.skd007 ? "skd007 " : "", e.skd022 ? "skd022 " : "",
			 e.skd010 ? "skd010 " : "", e.skl014 ? "skl014 " : "", e.skl168 ? "skl168 " : "",
			 e.apl12 ? "apl12 " : "", e.apl11 ? "apl11 " : "");
	if (n > 0 && (size_t)n <= size && buf[n - 1] == ' ')
		buf[--n] = 0;
	return n;
}

static void bbuf_fill(struct btr_ptflow *f, unsigned from);

int btr_ptflow_new(struct btr_image *img, const struct btr_ptflow_config *cfg,
		   struct btr_ptflow **out)
{
	if (!img || !out)
		return -BTR_ERR_INVAL;
	if (cfg && cfg->sz && cfg->sz < offsetof(struct btr_ptflow_config, tid))
		return -BTR_ERR_INVAL;
	/* aligned: struct blk (embedded as pend_copy) is cache-line aligned */
	struct btr_ptflow *f = aligned_alloc(64, (sizeof(*f) + 63) & ~(size_t)63);
	if (!f)
		return -BTR_ERR_NOMEM;
	memset(f, 0, sizeof(*f));
	if (cfg) {
		size_t n = cfg->sz && cfg->sz < sizeof(f->cfg) ? cfg->sz : sizeof(f->cfg);
		memcpy(&f->cfg, cfg, n);
	}
	f->cfg.sz = sizeof(f->cfg);
	if (f->cfg.n_ip_filter > 4)
		f->cfg.n_ip_filter = 4;
	if (!f->cfg.mtc_freq)
		f->cfg.mtc_freq = 3;   /* perf's default mtc_period */
	errata_for(&f->cfg, &f->er);
	f->cache_bits = f->cfg.cache_bits ? f->cfg.cache_bits : CACHE_BITS_DEFAULT;
	if (f->cache_bits < 8 || f->cache_bits > 22) {
		free(f);
		return -BTR_ERR_INVAL;
	}
	size_t n = (size_t)1 << f->cache_bits;
	f->blks = aligned_alloc(64, n * sizeof(*f->blks));
	f->idx = aligned_alloc(64, n * sizeof(*f->idx));
	if (f->idx)
		memset(f->idx, 0, n * sizeof(*f->idx));
	f->lens = malloc(n * BLK_MAXI);
	f->cold = calloc(n, sizeof(*f->cold));
	f->bbuf = calloc(BTR_PTFLOW_BATCH, sizeof(*f->bbuf));
	f->cur = NIL;
	f->rs_nolink = NIL;
	if (!f->blks || !f->idx || !f->lens || !f->cold || !f->bbuf) {
		btr_ptflow_free(f);
		return -BTR_ERR_NOMEM;
	}
	memset(f->bbuf, 0, BTR_PTFLOW_BATCH * sizeof(*f->bbuf));
	bbuf_fill(f, 0);
	f->img = img;
	f->img_gen = btr_image_generation(img);
	*out = f;
	return 0;
}

void btr_ptflow_free(struct btr_ptflow *f)
{
	if (!f)
		return;
	free(f->blks);
	free(f->idx);
	free(f->lens);
	free(f->cold);
	free(f->bbuf);
	free(f);
}

void btr_ptflow_stats(const struct btr_ptflow *f, struct btr_ptflow_stats *st)
{
	if (f && st)
		*st = f->st;
}

/* ---- output ----------------------------------------------------------- */

/* Privilege from the address: the upper canonical half is the kernel's
 * on Linux x86-64 (PT itself does not say; CPL filtering does). */
#define KFLAGS(from, to) ((unsigned)(((from) >> 63) << 1) | (unsigned)(((to) >> 63) << 8))
_Static_assert(BTR_BF_KERNEL == 1u << 1 && BTR_BF_TO_KERNEL == 1u << 8, "KFLAGS bit positions");

/* Restores the constant fields of the batch records from @from on. */
static void bbuf_fill(struct btr_ptflow *f, unsigned from)
{
	for (unsigned k = from; k < BTR_PTFLOW_BATCH; k++) {
		f->bbuf[k].tsc = f->bbuf_tsc;
		f->bbuf[k].tid = f->cfg.tid;
		f->bbuf[k].cycles = 0;
	}
	if (!from)
		f->bbuf_dirty = 0;
}

/* Delivers the batched branch records (cb->branches). */
static void flush_branches(struct btr_ptflow *f)
{
	unsigned n = f->bn;
	if (!n)
		return;
	f->bn = 0;
	if (!f->stopped && f->cb->branches(f->cb->ctx, f->bbuf, n))
		f->stopped = 1;
	if (f->bbuf_dirty)
		bbuf_fill(f, 0);
}

static void emit_event(struct btr_ptflow *f, enum btr_flow_event_type t, int reason,
		       uint64_t ip, uint64_t payload)
{
	if (t == BTR_FLOW_GAP)
		f->st.gaps++;
	if (t == BTR_FLOW_OVERFLOW)
		f->st.overflows++;
	if (!f->cb || !f->cb->event)
		return;
	/* Branches before the event first. */
	flush_branches(f);
	if (f->stopped)
		return;
	struct btr_flow_event ev = {
		.type = t, .reason = reason, .offset = f->pkt_off, .ip = ip,
		.tsc = f->tsc, .payload = payload,
	};
	if (f->cb->event(f->cb->ctx, &ev))
		f->stopped = 1;
}

static inline void emit_branch(struct btr_ptflow *f, uint64_t from, uint64_t to,
			       unsigned kind, unsigned flags)
{
	f->st.branches++;
	f->st.by_kind[kind]++;
	if (!f->cb || (!f->cb->branch && !f->cb->branches)) {
		f->since = 0;
		return;
	}
	struct btr_branch b;
	b.from = from;
	b.to = to;
	b.tsc = f->tsc;
	b.insns = f->since;
	b.tid = f->cfg.tid;
	b.cycles = 0;
	b.kind = (uint8_t)kind;
	b.reserved = 0;
	b.pid = 0;
	flags |= BTR_BF_INSNS | KFLAGS(from, to);
	if (f->tsc)
		flags |= BTR_BF_TSC;
	if (f->have_cyc) {
		flags |= BTR_BF_CYCLES;
		b.cycles = f->cyc_acc > UINT32_MAX ? UINT32_MAX : (uint32_t)f->cyc_acc;
		f->cyc_acc = 0;
		f->have_cyc = 0;
	}
	b.flags = (uint16_t)flags;
	f->since = 0;
	if (f->cb->branches) {
		f->bbuf_dirty = 1;
		f->bbuf[f->bn++] = b;
		if (f->bn == BTR_PTFLOW_BATCH)
			flush_branches(f);
		return;
	}
	if (f->cb->branch(f->cb->ctx, &b))
		f->stopped = 1;
}

/* Reports the first @n instructions of @b. */
static void emit_insns(struct btr_ptflow *f, const struct blk *b, unsigned n)
{
	const uint8_t *lens = f->lens + (size_t)(b - f->blks) * BLK_MAXI;
	uint64_t ip = b->ip;
	flush_branches(f);
	for (unsigned i = 0; i < n && !f->stopped; i++) {
		struct btr_insn in = { .ip = ip, .len = lens[i] };
		if (i + 1 == b->ninsn) {
			in.kind = b->kind;
			const struct blk_cold *c = &f->cold[b - f->blks];
			in.flags = c->end_flags;
			in.imm = c->end_imm;
			in.target = (c->end_flags & BTR_INSN_DIRECT) ? b->to[1] : 0;
		}
		if (f->cb->insn(f->cb->ctx, ip, &in))
			f->stopped = 1;
		ip += lens[i];
	}
}

/* Executes all of block @b (its instructions are reported). */
static inline void exec_blk(struct btr_ptflow *f, const struct blk *b)
{
	f->st.insns += b->ninsn;
	f->since += b->ninsn;
	if (btr_unlikely(f->cb && f->cb->insn))
		emit_insns(f, b, b->ninsn);
}

/* ---- block decoding --------------------------------------------------- */

/* First entry of @ip's index set. */
static inline size_t blk_set(const struct btr_ptflow *f, uint64_t ip)
{
	return (size_t)((ip * 0x9E3779B97F4A7C15ull) >> (64 - f->cache_bits)) & ~(size_t)(WAYS - 1);
}

/* Forgets every block (the array is full, or the image changed).  Links
 * into the old blocks stay harmless: they are validated by address and
 * mode, and a reused block is rebuilt with fresh links. */
static void flush_blocks(struct btr_ptflow *f, int image_changed)
{
	memset(f->idx, 0, sizeof(*f->idx) << f->cache_bits);
	/* A changed image also invalidates the blocks themselves (all of
	 * them: links and return-stack entries may still reach blocks left
	 * from before an earlier flush). */
	if (image_changed) {
		memset(f->blks, 0, sizeof(*f->blks) << f->cache_bits);
		/* The return stack's links pointed into those blocks and now
		 * read NULL (not NIL): detach them (the addresses stay). */
		for (unsigned i = 0; i < RETSTACK; i++)
			f->rsl[i] = &f->rs_nolink;
	}
	f->nblk = 0;
	f->cur = NIL;
}

static enum blk_class class_of(const struct btr_insn *in)
{
	switch (in->kind) {
	case BTR_KIND_JCC: case BTR_KIND_LOOP: case BTR_KIND_JRCXZ:
		return C_COND;
	case BTR_KIND_JMP:
		return C_JMP;
	case BTR_KIND_CALL:
		return C_CALL;
	case BTR_KIND_CALL_IND: case BTR_KIND_JMP_IND:
		return C_IND;
	case BTR_KIND_RET:
		return C_RET;
	case BTR_KIND_NONE:
		return C_NONE;
	default:
		return C_FAR;
	}
}

/* Decodes the block at @ip in the current mode into a new block and
 * indexes it.  Returns the block, or NULL with *@err set (-BTR_ERR_NOMAP,
 * -BTR_ERR_BAD_INSN) if not even the first instruction decodes. */
static struct blk *build_blk(struct btr_ptflow *f, uint64_t ip, int *err)
{
	if (btr_unlikely(btr_image_generation(f->img) != f->img_gen)) {
		/* The image changed: every cached block may be stale. */
		flush_blocks(f, 1);
		f->img_gen = btr_image_generation(f->img);
	}
	if (btr_unlikely(f->nblk == (uint32_t)1 << f->cache_bits))
		flush_blocks(f, 0);
	uint32_t nb = f->nblk;
	struct blk *b = &f->blks[nb];
	struct blk_cold *cold = &f->cold[nb];
	uint8_t *lens = f->lens + (size_t)nb * BLK_MAXI;
	uint64_t cur = ip;
	unsigned n = 0;
	struct btr_insn in, last = { 0 };
	enum blk_class cls = C_NONE;
	b->mode = 0;  /* invalid while we fill it */
	for (;;) {
		const uint8_t *p;
		size_t avail;
		uint8_t tmp[16];
		int r = btr_image_map(f->img, cur, &p, &avail);
		if (r == 0 && avail < 15) {
			/* An instruction may straddle two adjacent sections. */
			memcpy(tmp, p, avail);
			int r2 = btr_image_read(f->img, cur + avail, tmp + avail, 15 - avail);
			if (r2 > 0)
				avail += (size_t)r2;
			p = tmp;
		}
		if (r == 0)
			r = btr_insn_decode(p, avail, cur, (enum btr_exec_mode)f->mode, &in);
		if (r < 0) {
			if (n == 0) {
				*err = r == -BTR_ERR_NOMAP ? r : -BTR_ERR_BAD_INSN;
				return NULL;
			}
			/* End the block before the bad instruction; the next
			 * lookup reports the error at the right place. */
			cls = C_NONE;
			break;
		}
		last = in;
		lens[n++] = in.len;
		cls = class_of(&in);
		cur += in.len;
		if (cls != C_NONE || n == BLK_MAXI)
			break;
	}
	f->st.blocks_decoded++;
	b->ip = ip;
	b->ninsn = (uint8_t)n;
	b->len = (uint16_t)(cur - ip);
	b->end_len = lens[n - 1];
	b->kind = cls == C_NONE ? BTR_KIND_NONE : last.kind;
	cold->end_flags = last.flags;
	cold->end_imm = last.imm;
	b->to[0] = cur;
	b->to[1] = (last.flags & BTR_INSN_DIRECT) ? last.target : 0;
	b->end_ip = cur - b->end_len;
	/* The record tails of the direct branches (flags other than
	 * INSNS/TSC/CYCLES, which depend on the walk, and the kind). */
	b->tail[0] = (uint32_t)KFLAGS(b->end_ip, b->to[0]) | (uint32_t)b->kind << 16;
	b->tail[1] = (uint32_t)(BTR_BF_TAKEN | KFLAGS(b->end_ip, b->to[1])) | (uint32_t)b->kind << 16;
	b->cls = (uint8_t)cls;
	b->jcc = cls == C_COND && b->kind == BTR_KIND_JCC;
	b->next[0] = b->next[1] = NIL;
	b->mode = (uint8_t)(f->mode + 1);
	f->nblk = nb + 1;

	/* Index it: an empty way, else the oldest block (lowest number). */
	struct blk_ref *set = &f->idx[blk_set(f, ip)], *v = &set[0];
	for (unsigned w = 0; w < WAYS; w++) {
		if (!set[w].ref) {
			v = &set[w];
			break;
		}
		if (set[w].ref < v->ref)
			v = &set[w];
	}
	v->ip = ip;
	v->ref = nb + 1;
	v->mode = b->mode;
	return b;
}

static inline struct blk *lookup(struct btr_ptflow *f, uint64_t ip, int *err)
{
	const struct blk_ref *set = &f->idx[blk_set(f, ip)];
	uint32_t m = f->mode + 1u;
	for (unsigned w = 0; w < WAYS; w++)
		if (btr_likely(set[w].ip == ip && set[w].mode == m && set[w].ref))
			return &f->blks[set[w].ref - 1];
	return build_blk(f, ip, err);
}

/* Successor @which of @b at @ip, through the link. */
static inline struct blk *succ(struct btr_ptflow *f, struct blk *b, int which, uint64_t ip, int *err)
{
	struct blk *s = b->next[which];
	if (btr_likely(s->ip == ip && s->mode == f->mode + 1))
		return s;
	s = lookup(f, ip, err);
	/* (If the lookup flushed the blocks, @b is dead and writing its
	 * link is harmless.) */
	if (s)
		b->next[which] = s;
	return s;
}

/* ---- state helpers ---------------------------------------------------- */

static inline uint64_t rd_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static const uint8_t ipc_len[8] = { 0, 2, 4, 6, 6, 0xff, 8, 0xff };

/* The IP of an IP packet with compression @ipc and payload @p, given
 * the last IP @last (SDM "IP Compression"). */
static inline uint64_t ip_of(uint64_t last, unsigned ipc, const uint8_t *p)
{
	uint64_t ip;
	switch (ipc) {
	case 1: ip = (last & ~0xffffull) | rd_le(p, 2); break;
	case 2: ip = (last & ~0xffffffffull) | rd_le(p, 4); break;
	case 3: ip = rd_le(p, 6); if (ip & (1ull << 47)) ip |= 0xffff000000000000ull; break;
	case 4: ip = (last & ~0xffffffffffffull) | rd_le(p, 6); break;
	case 6: ip = rd_le(p, 8); break;
	default: ip = last; break;
	}
	return ip;
}

static inline uint64_t ip_reconstruct(struct btr_ptflow *f, unsigned ipc, const uint8_t *p)
{
	if (ipc_len[ipc] == 0xff || ipc == 0)
		return f->last_ip;
	f->last_ip = ip_of(f->last_ip, ipc, p);
	return f->last_ip;
}

/* Pushes return address @ip; @link (may be NULL) remembers its block. */
static inline void rs_push(struct btr_ptflow *f, uint64_t ip, struct blk **link)
{
	f->rs_top = (f->rs_top + 1) % RETSTACK;
	f->rs[f->rs_top] = ip;
	f->rsl[f->rs_top] = link ? link : &f->rs_nolink;
	if (f->rs_n < RETSTACK)
		f->rs_n++;
}

static inline uint64_t rs_pop(struct btr_ptflow *f)
{
	uint64_t ip = f->rs[f->rs_top];
	f->rs_top = (f->rs_top + RETSTACK - 1) % RETSTACK;
	f->rs_n--;
	return ip;
}

static inline int tnt_pop(struct btr_ptflow *f)
{
	unsigned h = f->tq_head;
	unsigned n = --f->tq_n[h];
	int bit = (int)((f->tq_bits[h] >> n) & 1);
	f->tnt_total--;
	if (n == 0) {
		f->tq_head = (h + 1) % TNTQ;
		f->tq_cnt--;
	}
	return bit;
}

static void tnt_clear(struct btr_ptflow *f)
{
	f->tq_head = f->tq_cnt = f->tnt_total = 0;
}

/* Flow lost: report a gap and wait for the next IP. */
static void gap(struct btr_ptflow *f, int reason, uint64_t ip)
{
	emit_event(f, BTR_FLOW_GAP, reason, ip, 0);
	tnt_clear(f);
	f->pend = NULL;
	f->async_pending = 0;
	f->rs_n = 0;
	if (f->en == EN_ON)
		f->en = EN_LOST;
}

static void apply_next_mode(struct btr_ptflow *f)
{
	if (f->have_next_mode) {
		f->have_next_mode = 0;
		if (f->mode != f->next_mode) {
			f->mode = f->next_mode;
			emit_event(f, BTR_FLOW_MODE, 0, f->ip, f->mode);
		}
	}
}

static void set_pend(struct btr_ptflow *f, struct blk *b)
{
	f->pend_copy = *b;
	f->pend = &f->pend_copy;
}

/* ---- the walker ------------------------------------------------------- */

enum goal {
	G_TNT,   /* consume queued TNT bits; stop when none are left */
	G_TIP,   /* reach the next indirect transfer; it goes to @x */
	G_FUP,   /* reach instruction @x (not executed) */
	G_PGD,   /* reach the branch the TIP.PGD binds to; @x target (or suppressed) */
};

/* Does a TIP.PGD (target @x, or @suppressed) bind to the branch ending @b?
 * The rules of libipt's pt_insn_at_disabled_event: with an IP it binds to
 * any branch except a direct one going elsewhere; without an IP only to
 * far transfers, or (erratum SKL014, "Intel PT TIP.PGD May Not Have Target
 * IP Payload", when IP filtering is configured) to any branch. */
static int pgd_binds(const struct btr_ptflow *f, const struct blk *b, uint64_t x, int suppressed)
{
	if (b->cls == C_NONE)
		return 0;
	if (suppressed) {
		if (b->cls == C_FAR)
			return 1;
		return f->er.skl014 && f->cfg.n_ip_filter > 0;
	}
	if ((b->cls == C_JMP || b->cls == C_CALL) && b->to[1] != x)
		return 0;
	return 1;
}

/* Walks from f->ip towards @goal.  Returns 1 when the goal was reached
 * (for G_TIP/G_PGD: the block ending in the bound branch is in *@endp,
 * executed), 0 when G_TNT ran out of bits (or stopped at a branch that
 * needs a TIP: f->pend), or a negative error (caller reports the gap). */
static int walk(struct btr_ptflow *f, enum goal goal, uint64_t x, int suppressed, struct blk **endp)
{
	int err = 0;
	unsigned guard = 0;
	struct blk *b = lookup(f, f->ip, &err);
	const int retcomp = !f->cfg.no_retcomp;

	for (;;) {
		if (btr_unlikely(!b))
			return err;
		if (btr_unlikely(f->stopped))
			return 0;
		if (goal == G_TNT) {
			if (!f->tnt_total)
				return 0;
		} else if (goal == G_FUP && x >= b->ip && x <= END_IP(b)) {
			/* Stop before @x inside this block. */
			const uint8_t *lens = f->lens + (size_t)(b - f->blks) * BLK_MAXI;
			uint64_t a = b->ip;
			unsigned i = 0;
			while (a < x && i < b->ninsn)
				a += lens[i++];
			if (a != x)
				return -BTR_ERR_BAD_CONTEXT;
			f->st.insns += i;
			f->since += i;
			if (f->cb && f->cb->insn)
				emit_insns(f, b, i);
			f->ip = x;
			return 1;
		}
		if (btr_unlikely(++guard > WALK_LIMIT))
			return -BTR_ERR_BAD_CONTEXT;

		switch (b->cls) {
		case C_NONE:
			exec_blk(f, b);
			f->ip = NEXT(b);
			b = succ(f, b, 0, NEXT(b), &err);
			continue;
		case C_COND:
			if (!f->tnt_total) {
				if (goal == G_PGD && pgd_binds(f, b, x, suppressed))
					goto bind;
				return -BTR_ERR_BAD_CONTEXT;
			}
			guard = 0;
			exec_blk(f, b);
			if (tnt_pop(f)) {
				emit_branch(f, END_IP(b), b->to[1], b->kind, BTR_BF_TAKEN);
				f->ip = b->to[1];
				b = succ(f, b, 1, b->to[1], &err);
			} else {
				emit_branch(f, END_IP(b), NEXT(b), b->kind, 0);
				f->ip = NEXT(b);
				b = succ(f, b, 0, NEXT(b), &err);
			}
			continue;
		case C_JMP:
		case C_CALL:
			if (goal == G_PGD && pgd_binds(f, b, x, suppressed))
				goto bind;
			exec_blk(f, b);
			/* A call to the next instruction (PIC "call; pop") is not
			 * pushed: the hardware does not expect its RET either. */
			if (b->cls == C_CALL && b->to[1] != NEXT(b))
				rs_push(f, NEXT(b), &b->next[0]);
			emit_branch(f, END_IP(b), b->to[1], b->kind, BTR_BF_TAKEN);
			f->ip = b->to[1];
			b = succ(f, b, 1, b->to[1], &err);
			continue;
		case C_RET:
			if (retcomp && f->rs_n && f->tnt_total) {
				/* Compressed return: a taken bit. */
				guard = 0;
				exec_blk(f, b);
				if (!tnt_pop(f))
					return -BTR_ERR_BAD_CONTEXT;
				uint64_t to = rs_pop(f);
				emit_branch(f, END_IP(b), to, b->kind, BTR_BF_TAKEN);
				f->ip = to;
				b = lookup(f, to, &err);
				continue;
			}
			/* needs a TIP */
			__attribute__((fallthrough));
		case C_IND:
		case C_FAR:
			if (goal == G_TIP)
				goto bind;
			if (goal == G_PGD) {
				if (pgd_binds(f, b, x, suppressed))
					goto bind;
				return -BTR_ERR_BAD_CONTEXT;
			}
			if (goal == G_TNT) {
				/* Bits left after an indirect branch: the hardware
				 * deferred its TIP (SDM "Deferred TIPs"). */
				exec_blk(f, b);
				if (b->cls == C_IND && b->kind == BTR_KIND_CALL_IND)
					rs_push(f, NEXT(b), &b->next[0]);
				set_pend(f, b);
				return 0;
			}
			return -BTR_ERR_BAD_CONTEXT;
		}
	}
bind:
	exec_blk(f, b);
	if (b->kind == BTR_KIND_CALL_IND || (b->cls == C_CALL && b->to[1] != NEXT(b)))
		rs_push(f, NEXT(b), &b->next[0]);
	*endp = b;
	return 1;
}


/* The hot path: G_TNT without an instruction callback.  The same rules
 * as walk(), with the TNT word, the counters and the output in
 * registers (a callback is opaque, so through @f every field would be
 * reloaded after each call).  The bits come from the TNT queue first,
 * then, if @p is not NULL, straight from the TNT packets (and PADs)
 * that start at @p[*pos..limit) (they may extend to @p[n]), so a run of
 * TNT packets is one walk.  *@pos advances past the packets consumed
 * (whole packets: bits left when the walk stops at an indirect branch
 * are queued), f->pkt_off becomes the stream offset (@off + index) of
 * the last one.  Returns like walk(). */
static inline __attribute__((always_inline)) int
walk_fast_t(struct btr_ptflow *f, const uint8_t *p, size_t n, size_t limit, uint64_t off, size_t *pos,
	    const int omode)
{
	int err = 0, ret = 0;
	const uint8_t m1 = (uint8_t)(f->mode + 1);
	const int retcomp = !f->cfg.no_retcomp;
	/* Counters live in registers: an increment through memory on every
	 * edge would be a loop-carried store-to-load chain.  Only JCC (the
	 * common kind) is counted here, rarer kinds go to f->st directly;
	 * the instruction count since the last branch is insns - mark. */
	uint64_t insns = f->st.insns, mark = f->st.insns - f->since;
	/* JCC branches are not counted one by one either: each consumes one
	 * TNT bit, so they are the bits consumed (loaded - nb) minus the
	 * other bit consumers, counted in f->fw_nonjcc. */
	uint64_t loaded = 0, gmark = 0;
	f->fw_nonjcc = 0;
	unsigned h = f->tq_head, qn = f->tq_cnt;
	uint64_t bits = 0;
	unsigned nb = 0, guard = 0;
	size_t i = *pos, pkt = *pos;
	struct blk *b = NULL;
	uint64_t ip = f->ip;

	int (*const bcb)(void *, const struct btr_branch *) = f->cb->branch;
	void *const bctx = f->cb->ctx;
	struct btr_branch *const ob = f->bbuf;
	unsigned on = f->bn;
	/* Timing packets are not processed during a walk: the timestamp is
	 * the same for every branch of this call.  A CYC count goes to the
	 * first branch. */
	const uint64_t tsc = f->tsc;
	const uint32_t tid = f->cfg.tid;
	const uint32_t tscfl = BTR_BF_INSNS | (tsc ? BTR_BF_TSC : 0);
	uint32_t cyc = 0, cycfl = 0;
	uint64_t cyc_saved = f->cyc_acc;
	if (f->have_cyc && omode) {
		cyc = f->cyc_acc > UINT32_MAX ? UINT32_MAX : (uint32_t)f->cyc_acc;
		cycfl = BTR_BF_CYCLES;
		f->have_cyc = 0;
		f->cyc_acc = 0;
	}
	struct btr_branch br;
	br.tid = tid;
	br.tsc = tsc;
	br.reserved = 0;
	br.pid = 0;
	if (omode == 2 && btr_unlikely(f->bbuf_tsc != tsc)) {
		/* The records still buffered keep their time. */
		f->bbuf_tsc = tsc;
		bbuf_fill(f, on);
		f->bbuf_dirty = 1;
	}

	/* Counts a branch that consumed no TNT bit (@bit 0) or one that is
	 * not a JCC (@bit 1). */
#define FAST_COUNT(kind_, bit_)                                                  \
	do {                                                                     \
		f->st.by_kind[kind_]++;                                          \
		f->st.branches++;                                                \
		f->fw_nonjcc += (bit_);                                          \
	} while (0)
#define FAST_EMIT(from_, to_, kind_, tail_)                                      \
	do {                                                                     \
		if (omode == 2) {                                                \
			struct btr_branch *o_ = &ob[on];                         \
			uint32_t t_ = (tail_) | tscfl | cycfl;                   \
			o_->from = (from_);                                      \
			o_->to = (to_);                                          \
			o_->insns = insns - mark;                                \
			memcpy(&o_->flags, &t_, 4);                              \
			if (btr_unlikely(cycfl)) {                               \
				o_->cycles = cyc;                                \
				f->bbuf_dirty = 1;                               \
			}                                                        \
			cyc = cycfl = 0;                                         \
			if (btr_unlikely(++on == BTR_PTFLOW_BATCH)) {            \
				f->bn = on;                                      \
				flush_branches(f);                               \
				on = 0;                                          \
				if (f->stopped) {                                \
					mark = insns;                            \
					goto out;                                \
				}                                                \
			}                                                        \
		} else if (omode == 1) {                                         \
			uint32_t t_ = (tail_) | tscfl | cycfl;                   \
			br.from = (from_);                                       \
			br.to = (to_);                                           \
			br.insns = insns - mark;                                 \
			br.cycles = cyc;                                         \
			br.flags = (uint16_t)t_;                                 \
			br.kind = (uint8_t)(t_ >> 16);                           \
			cyc = cycfl = 0;                                         \
			if (btr_unlikely(bcb(bctx, &br))) {                      \
				f->stopped = 1;                                  \
				mark = insns;                                    \
				goto out;                                        \
			}                                                        \
		}                                                                \
		mark = insns;                                                    \
	} while (0)
	/* Follows link @which of @b to @to (lookup on a miss).  In TIP mode
	 * (walking to the branch a TIP resolves, packet not yet consumed) a
	 * failure leaves the TIP to on_tip, which reports it. */
#define FAST_NEXT(which, to_)                                                    \
	do {                                                                     \
		struct blk *s_ = b->next[which];                                 \
		uint64_t t_ = (to_);                                             \
		if (btr_likely(s_->ip == t_ && s_->mode == m1)) {                \
			b = s_;                                                  \
		} else {                                                         \
			ip = t_;                                                 \
			s_ = lookup(f, ip, &err);                                \
			if (!s_) {                                               \
				b = NULL;                                        \
				ret = tipmode ? 0 : err;                         \
				goto out;                                        \
			}                                                        \
			b->next[which] = s_;                                     \
			b = s_;                                                  \
		}                                                                \
	} while (0)
	/* The block at ip when none is at hand: the candidate (the walk's
	 * last stop, or the last target of the indirect branch just
	 * resolved), else a lookup. */
	/* Direct blocks walked since the last TNT bit (a loop without trace
	 * is an error). */
#define FAST_GUARD(fail_)                                                        \
	do {                                                                     \
		if (loaded - nb != gmark) {                                      \
			gmark = loaded - nb;                                     \
			guard = 0;                                               \
		}                                                                \
		if (btr_unlikely(++guard > WALK_LIMIT)) {                        \
			fail_;                                                   \
			goto out;                                                \
		}                                                                \
	} while (0)
#define FAST_ACQUIRE()                                                           \
	do {                                                                     \
		b = cand;                                                        \
		if (btr_unlikely(b->ip != ip || b->mode != m1)) {                \
			b = lookup(f, ip, &err);                                 \
			if (!b) {                                                \
				ret = tipmode ? 0 : err;                         \
				goto out;                                        \
			}                                                        \
			if (lk)                                                  \
				*lk = b;                                         \
		}                                                                \
		lk = NULL;                                                       \
	} while (0)

	struct blk *cand = f->cur, **lk = NULL;
	int tipmode = 0;
	for (;;) {
		if (!nb) {
			/* Next TNT word: the queue, then the stream. */
			if (qn) {
				bits = f->tq_bits[h];
				nb = f->tq_n[h];
				loaded += nb;
				h = (h + 1) % TNTQ;
				qn--;
			} else if (p) {
				for (;;) {
					if (i >= limit)
						goto out;
					uint8_t c = p[i];
					if (c == 0x00) {          /* PAD */
						i++;
						continue;
					}
					if (!(c & 1) && c != 0x02) {
						/* short TNT: stop bit, up to 6 bits, oldest highest */
						unsigned hi = 31u - (unsigned)__builtin_clz(c);
						bits = (uint64_t)(c >> 1) & ((1u << (hi - 1)) - 1);
						nb = hi - 1;
						loaded += nb;
						pkt = i++;
						break;
					}
					if (c == 0x02 && i + 8 <= n && p[i + 1] == 0xa3) {
						/* long TNT: 48-bit payload with stop bit */
						uint64_t v = rd_le(p + i + 2, 6);
						pkt = i;
						i += 8;
						if (!v)
							continue;
						unsigned hi = 63u - (unsigned)__builtin_clzll(v);
						bits = v & ((1ull << hi) - 1);
						nb = hi;
						loaded += nb;
						if (nb)
							break;
						continue;
					}
					if ((c & 0x1f) == 0x0d && (c >> 5) && ipc_len[c >> 5] != 0xff &&
					    i + 1 + ipc_len[c >> 5] <= n && !f->async_pending &&
					    !f->have_next_mode) {
						/* TIP (not suppressed, not part of an
						 * asynchronous transfer, no mode change):
						 * walk to the indirect branch it resolves,
						 * as on_tip() would. */
						unsigned ipc = c >> 5;
						uint64_t tip = ip_of(f->last_ip, ipc, p + i + 1);
						tipmode = 1;
						guard = 0;   /* on_tip's walk would start afresh */
						gmark = loaded - nb;
						if (!b)
							FAST_ACQUIRE();
						for (;;) {
							unsigned cls = b->cls;
							if (cls == C_NONE) {
								FAST_GUARD((void)0);
								insns += b->ninsn;
								FAST_NEXT(0, b->to[0]);
							} else if (cls == C_JMP || cls == C_CALL) {
								FAST_GUARD((void)0);
								insns += b->ninsn;
								if (cls == C_CALL && b->to[1] != b->to[0])
									rs_push(f, b->to[0], &b->next[0]);
								FAST_COUNT(b->kind, 0);
								FAST_EMIT(b->end_ip, b->to[1], b->kind, b->tail[1]);
								FAST_NEXT(1, b->to[1]);
							} else if (cls == C_COND) {
								goto out;   /* on_tip reports it */
							} else {
								break;
							}
						}
						/* bound: IND, RET or FAR */
						tipmode = 0;
						guard = 0;
						gmark = loaded - nb;
						insns += b->ninsn;
						if (b->kind == BTR_KIND_CALL_IND)
							rs_push(f, b->to[0], &b->next[0]);
						f->last_ip = tip;
						pkt = i;
						i += 1u + ipc_len[ipc];
						FAST_COUNT(b->kind, 0);
						FAST_EMIT(b->end_ip, tip, b->kind,
							  (uint32_t)(BTR_BF_TAKEN | KFLAGS(b->end_ip, tip)) |
								  (uint32_t)b->kind << 16);
						/* The target block is looked up when it
						 * is needed (a failure belongs to that
						 * packet); next[1] of an indirect branch
						 * remembers its last target. */
						ip = tip;
						cand = b->next[1];
						lk = &b->next[1];
						b = NULL;
						continue;
					}
					goto out;
				}
			} else {
				goto out;
			}
		}
		if (btr_unlikely(!b))
			FAST_ACQUIRE();
		/* JCCs dominate: an inner loop for them, tested before the
		 * switch (one well-predicted compare instead of a jump table). */
		if (btr_likely(b->jcc)) {
			do {
				/* Branch-free on the bit: the TNT word is in a
				 * register long before the walk needs it, while a
				 * branch on it mispredicts as often as the traced
				 * program's did.  (Loading both links and selecting
				 * one with a cmov shortens the dependency chain but
				 * measured slower: the loop is bound by its
				 * instruction count.) */
				unsigned t = (unsigned)(bits >> --nb) & 1;
				insns += b->ninsn;
				uint64_t to = b->to[t];
				struct blk *s = b->next[t];
				FAST_EMIT(b->end_ip, to, BTR_KIND_JCC, b->tail[t]);
				if (btr_likely(s->ip == to && s->mode == m1))
					b = s;
				else
					FAST_NEXT(t, to);
			} while (nb && b->jcc);
			continue;
		}
		switch (b->cls) {
		case C_COND: {
			/* LOOP, JRCXZ */
			unsigned t = (unsigned)(bits >> --nb) & 1;
			insns += b->ninsn;
			uint64_t to = b->to[t];
			FAST_COUNT(b->kind, 1);
			FAST_EMIT(b->end_ip, to, b->kind, b->tail[t]);
			FAST_NEXT(t, to);
			continue;
		}
		case C_NONE:
			FAST_GUARD(ret = -BTR_ERR_BAD_CONTEXT);
			insns += b->ninsn;
			FAST_NEXT(0, b->to[0]);
			continue;
		case C_JMP:
		case C_CALL:
			FAST_GUARD(ret = -BTR_ERR_BAD_CONTEXT);
			insns += b->ninsn;
			/* A call to the next instruction (PIC "call; pop") is not
			 * pushed: the hardware does not expect its RET either. */
			if (b->cls == C_CALL && b->to[1] != b->to[0])
				rs_push(f, b->to[0], &b->next[0]);
			FAST_COUNT(b->kind, 0);
			FAST_EMIT(b->end_ip, b->to[1], b->kind, b->tail[1]);
			FAST_NEXT(1, b->to[1]);
			continue;
		case C_RET:
			if (retcomp && f->rs_n) {
				/* Compressed return: a taken bit. */
				insns += b->ninsn;
				f->fw_nonjcc++;   /* the bit, JCC or not */
				if (!((bits >> --nb) & 1)) {
					ret = -BTR_ERR_BAD_CONTEXT;
					goto out;
				}
				struct blk **lnk = f->rsl[f->rs_top];
				uint64_t to = rs_pop(f);
				FAST_COUNT(b->kind, 0);
				FAST_EMIT(b->end_ip, to, b->kind,
					  (uint32_t)(BTR_BF_TAKEN | KFLAGS(b->end_ip, to)) | (uint32_t)b->kind << 16);
				b = *lnk;
				if (btr_unlikely(b->ip != to || b->mode != m1)) {
					ip = to;
					b = lookup(f, to, &err);
					if (!b) {
						ret = err;
						goto out;
					}
					*lnk = b;
				}
				continue;
			}
			__attribute__((fallthrough));
		default:
			/* An indirect branch with bits left: the hardware
			 * deferred its TIP (SDM "Deferred TIPs"). */
			insns += b->ninsn;
			if (b->kind == BTR_KIND_CALL_IND)
				rs_push(f, b->to[0], &b->next[0]);
			set_pend(f, b);
			ip = b->ip;
			b = NULL;
			goto out;
		}
	}
out:
	/* write the registers back */
	f->ip = b ? b->ip : ip;
	f->cur = b ? b : cand;
	f->since = insns - mark;
	f->st.insns = insns;
	uint64_t njcc = loaded - nb - f->fw_nonjcc;
	f->st.branches += njcc;
	f->st.by_kind[BTR_KIND_JCC] += njcc;
	if (omode == 2)
		f->bn = on;
	if (cycfl) {
		/* no branch took the CYC count */
		f->have_cyc = 1;
		f->cyc_acc = cyc_saved;
	}
	/* Bits left (a deferred TIP, an error, a stop): the current word
	 * goes back to the head of the queue. */
	if (nb) {
		h = (h + TNTQ - 1) % TNTQ;
		f->tq_bits[h] = bits & ((1ull << nb) - 1);
		f->tq_n[h] = (uint8_t)nb;
		qn++;
	}
	f->tq_head = qn ? h : 0;
	f->tq_cnt = qn;
	unsigned total = 0;
	for (unsigned k = 0; k < qn; k++)
		total += f->tq_n[(h + k) % TNTQ];
	f->tnt_total = total;
	if (p)
		f->pkt_off = off + pkt;
	*pos = i;
	return ret;
#undef FAST_EMIT
#undef FAST_NEXT
#undef FAST_ACQUIRE
#undef FAST_GUARD
#undef FAST_COUNT
}

/* walk_fast_t specialized by output (0 counts only, 1 per-branch
 * callback, 2 batches): fewer live values in the hot loop. */
static int walk_fast(struct btr_ptflow *f, const uint8_t *p, size_t n, size_t limit, uint64_t off,
		     size_t *pos)
{
	if (f->cb->branches)
		return walk_fast_t(f, p, n, limit, off, pos, 2);
	if (f->cb->branch)
		return walk_fast_t(f, p, n, limit, off, pos, 1);
	return walk_fast_t(f, p, n, limit, off, pos, 0);
}

/* ---- packet handlers -------------------------------------------------- */

static void do_enable(struct btr_ptflow *f, uint64_t ip)
{
	f->ip = ip;
	f->en = EN_ON;
	f->pend = NULL;
	f->async_pending = 0;
	apply_next_mode(f);
	emit_event(f, BTR_FLOW_ENABLE, 0, ip, 0);
}

static void on_tnt(struct btr_ptflow *f, uint64_t bits, unsigned n)
{
	if (f->en != EN_ON || !n)
		return;
	if (f->tq_cnt == TNTQ) {
		gap(f, -BTR_ERR_BAD_CONTEXT, f->ip);
		return;
	}
	unsigned t = (f->tq_head + f->tq_cnt) % TNTQ;
	f->tq_bits[t] = bits;
	f->tq_n[t] = (uint8_t)n;
	f->tq_cnt++;
	f->tnt_total += n;
	if (f->pend)
		return;  /* waiting for the deferred TIP */
	size_t used = 0;
	int r = f->cb->insn ? walk(f, G_TNT, 0, 0, NULL) : walk_fast(f, NULL, 0, 0, 0, &used);
	if (r < 0)
		gap(f, r, f->ip);
}

/* The branch that a TIP resolves: from the pending/bound block to @to. */
static void resolve_tip(struct btr_ptflow *f, const struct blk *b, uint64_t to, int suppressed)
{
	unsigned kind = b->kind;
	emit_branch(f, END_IP(b), suppressed ? 0 : to, kind, BTR_BF_TAKEN);
	f->pend = NULL;
	if (suppressed) {
		/* Target out of context (e.g. user-only tracing of a far
		 * transfer into the kernel): we lose the IP until the next
		 * IP packet. */
		f->en = EN_LOST;
		return;
	}
	f->ip = to;
	apply_next_mode(f);
}

static void on_tip(struct btr_ptflow *f, uint64_t ip, int suppressed)
{
	if (f->en == EN_OFF)
		return;
	if (f->en == EN_LOST) {
		f->after_ovf = 0;
		if (!suppressed) {
			/* Resynchronize at the target (also SKD010: "Intel PT
			 * FUP May be Dropped After OVF" - the TIP then gives the
			 * resume IP). */
			f->async_pending = 0;
			do_enable(f, ip);
		}
		return;
	}
	if (f->async_pending) {
		/* FUP + TIP: interrupt, exception, TSX abort. */
		f->async_pending = 0;
		unsigned fl = BTR_BF_TAKEN | (f->tsx_abort ? BTR_BF_TSX_ABORT : 0);
		if (f->tsx_abort)
			emit_event(f, BTR_FLOW_TSX_ABORT, 0, f->async_ip, 0);
		f->tsx_abort = 0;
		emit_event(f, BTR_FLOW_ASYNC, 0, f->async_ip, suppressed ? 0 : ip);
		emit_branch(f, f->async_ip, suppressed ? 0 : ip, BTR_KIND_ASYNC, fl);
		if (suppressed) {
			f->en = EN_LOST;
			return;
		}
		f->ip = ip;
		apply_next_mode(f);
		tnt_clear(f);
		return;
	}
	if (f->pend) {
		resolve_tip(f, f->pend, ip, suppressed);
		/* Bits queued behind a deferred TIP. */
		if (f->en == EN_ON && f->tnt_total) {
			size_t used = 0;
			int r = f->cb->insn ? walk(f, G_TNT, 0, 0, NULL)
					    : walk_fast(f, NULL, 0, 0, 0, &used);
			if (r < 0)
				gap(f, r, f->ip);
		}
		return;
	}
	struct blk *end = NULL;
	int r = walk(f, G_TIP, ip, suppressed, &end);
	if (r < 0) {
		gap(f, r, f->ip);
		if (!suppressed)
			do_enable(f, ip);
		return;
	}
	if (r == 1)
		resolve_tip(f, end, ip, suppressed);
}

static void on_pge(struct btr_ptflow *f, uint64_t ip, int suppressed)
{
	f->after_ovf = 0;
	if (suppressed) {
		f->en = EN_LOST;
		return;
	}
	tnt_clear(f);
	do_enable(f, ip);
}

static void on_pgd(struct btr_ptflow *f, uint64_t ip, int suppressed)
{
	if (f->after_ovf && f->er.apl11) {
		/* APL11: "Intel PT OVF Packet May Be Followed by TIP.PGD
		 * Packet" - ignore the spurious TIP.PGD. */
		return;
	}
	f->after_ovf = 0;
	if (f->en == EN_ON) {
		if (f->async_pending) {
			/* FUP + TIP.PGD: disabled asynchronously at the FUP IP,
			 * whose instruction did not execute - except for SKD022
			 * ("VM Entry That Clears TraceEn May Generate a FUP"):
			 * a FUP at VMLAUNCH/VMRESUME means it did execute. */
			f->async_pending = 0;
			uint64_t at = f->async_ip;
			if (f->er.skd022) {
				int err;
				struct blk *b = lookup(f, at, &err);
				if (b && b->ninsn && END_IP(b) == at && (f->cold[b - f->blks].end_flags & BTR_INSN_VMENTRY))
					exec_blk(f, b);
			}
			f->en = EN_OFF;
			emit_event(f, BTR_FLOW_DISABLE, 0, at, 0);
		} else if (f->pend) {
			resolve_tip(f, f->pend, ip, suppressed);
			f->en = EN_OFF;
			emit_event(f, BTR_FLOW_DISABLE, 0, END_IP(&f->pend_copy), 0);
		} else {
			struct blk *end = NULL;
			int r = walk(f, G_PGD, ip, suppressed, &end);
			if (r < 0) {
				gap(f, r, f->ip);
			} else if (r == 1) {
				unsigned kind = end->kind;
				uint64_t to = suppressed ? 0 : ip;
				if (end->cls == C_COND && !suppressed && ip == NEXT(end))
					emit_branch(f, END_IP(end), to, kind, 0);
				else
					emit_branch(f, END_IP(end), to, kind, BTR_BF_TAKEN);
				emit_event(f, BTR_FLOW_DISABLE, 0, END_IP(end), 0);
			}
		}
	} else if (f->en == EN_LOST) {
		emit_event(f, BTR_FLOW_DISABLE, 0, 0, 0);
	}
	f->en = EN_OFF;
	f->pend = NULL;
	f->async_pending = 0;
	tnt_clear(f);
}

static void on_fup(struct btr_ptflow *f, uint64_t ip, int suppressed)
{
	int status = f->fup_status;
	f->fup_status = 0;
	if (suppressed)
		return;
	if (f->in_psb) {
		f->psb_fup = 1;
		if (f->en == EN_ON && !f->pend) {
			/* A status FUP: where execution is at the PSB.  Walk to
			 * it so nothing before the PSB is lost. */
			int r = walk(f, G_FUP, ip, 0, NULL);
			if (r < 0) {
				gap(f, r, f->ip);
				do_enable(f, ip);
			}
		} else if (f->en != EN_ON || f->pend) {
			f->after_ovf = 0;
			f->pend = NULL;
			do_enable(f, ip);
		}
		return;
	}
	if (f->after_ovf) {
		f->after_ovf = 0;
		if (f->ovf_was_off && f->er.apl12) {
			/* APL12: "Intel PT OVF May Be Followed By An Unexpected
			 * FUP Packet" when tracing was off: ignore it. */
			return;
		}
		do_enable(f, ip);
		return;
	}
	if (f->en == EN_OFF)
		return;
	if (f->en == EN_LOST) {
		f->ip = ip;
		f->en = EN_ON;
		emit_event(f, BTR_FLOW_ENABLE, 0, ip, 0);
		if (!status) {
			f->async_pending = 1;
			f->async_ip = ip;
		}
		return;
	}
	if (f->pend) {
		/* An async event right after an indirect branch whose TIP
		 * never came: the trace contradicts the code. */
		gap(f, -BTR_ERR_BAD_CONTEXT, f->ip);
		do_enable(f, ip);
		return;
	}
	int r = walk(f, G_FUP, ip, 0, NULL);
	if (r < 0) {
		gap(f, r, f->ip);
		f->ip = ip;
		f->en = EN_ON;
	}
	if (!status || f->tsx_abort) {
		f->async_pending = 1;
		f->async_ip = ip;
	}
}

static void on_ovf(struct btr_ptflow *f)
{
	emit_event(f, BTR_FLOW_OVERFLOW, 0, f->ip, 0);
	f->ovf_was_off = f->en == EN_OFF;
	gap(f, -BTR_ERR_OVERFLOW, f->ip);
	f->in_psb = 0;   /* an OVF also terminates PSB+ (SDM) */
	/* Like libipt, forget the last IP: the IP packet after an overflow
	 * cannot be compressed against anything the decoder saw. */
	f->last_ip = 0;
	f->after_ovf = 1;
	if (f->en == EN_ON)
		f->en = EN_LOST;
}

static void on_psb(struct btr_ptflow *f)
{
	f->in_psb = 1;
	f->psb_fup = 0;
	f->last_ip = 0;
	/* Only RETs whose CALL came after the last PSB are compressed. */
	f->rs_n = 0;
}

static void on_psbend(struct btr_ptflow *f)
{
	f->in_psb = 0;
	if (!f->psb_fup && f->en != EN_OFF) {
		/* No FUP in PSB+: PacketEn is 0, tracing is off. */
		f->en = EN_OFF;
		f->pend = NULL;
		tnt_clear(f);
	}
}

static void on_mode_exec(struct btr_ptflow *f, uint8_t b)
{
	uint8_t m = (b & 1) ? BTR_MODE_64 : (b & 2) ? BTR_MODE_32 : BTR_MODE_16;
	if (f->in_psb || f->en != EN_ON) {
		if (f->mode != m) {
			f->mode = m;
			emit_event(f, BTR_FLOW_MODE, 0, f->ip, m);
		}
		f->have_next_mode = 0;
	} else {
		/* MODE.Exec precedes the TIP/TIP.PGE of the far transfer that
		 * changes the mode; the code before it still runs in the old. */
		f->next_mode = m;
		f->have_next_mode = 1;
	}
}

/* ---- timing ----------------------------------------------------------- */

static void on_tsc(struct btr_ptflow *f, uint64_t v)
{
	/* 56-bit payload; keep the upper byte of what we had. */
	uint64_t t = (f->tsc_pkt & ~((1ull << 56) - 1)) | v;
	if (f->tsc_pkt && t < f->tsc_pkt)
		t += 1ull << 56;
	f->tsc_pkt = t;
	f->tsc = t;
	f->tma_ok = 0;
}

static void on_tma(struct btr_ptflow *f, uint16_t ctc, uint16_t fc)
{
	(void)fc;
	f->art_base = ctc;
	f->art_now = ctc;
	f->tma_ok = 1;
}

static void on_mtc(struct btr_ptflow *f, uint8_t v)
{
	if (!f->tma_ok || !f->cfg.cpuid15_eax || !f->cfg.cpuid15_ebx)
		return;
	unsigned sh = f->cfg.mtc_freq;
	uint64_t cur = (f->art_now >> sh) & 0xff;
	uint64_t d = (uint64_t)((v - cur) & 0xff);
	f->art_now = ((f->art_now >> sh) + d) << sh;
	/* ART ticks -> TSC ticks through CPUID.15H (EBX/EAX). */
	uint64_t est = f->tsc_pkt + (f->art_now - f->art_base) * f->cfg.cpuid15_ebx / f->cfg.cpuid15_eax;
	if (est > f->tsc)
		f->tsc = est;
}

/* ---- packet parser ---------------------------------------------------- */

static const uint8_t psb_pattern[16] = { 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
					 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82 };



/* Parses and handles one packet at @p (@n bytes available).  Returns its
 * size, 0 if it is incomplete, or -1 for a byte that starts no packet. */
static int packet(struct btr_ptflow *f, const uint8_t *p, size_t n)
{
	uint8_t b = p[0];

	if (b == 0x00)
		return 1; /* PAD */
	if ((b & 1) == 0 && b != 0x02) {
		/* short TNT: stop bit, then up to 6 bits, oldest highest */
		unsigned hi = 31u - (unsigned)__builtin_clz(b);
		on_tnt(f, (uint64_t)(b >> 1) & ((1u << (hi - 1)) - 1), hi - 1);
		return 1;
	}
	if ((b & 3) == 3) {
		/* CYC: 5 bits, then 7 per extension byte while bit 0 is set */
		uint64_t v = b >> 3;
		size_t i = 1;
		unsigned sh = 5;
		if (b & 4) {
			for (;;) {
				if (i >= n)
					return 0;
				uint8_t c = p[i++];
				if (sh < 64)
					v |= (uint64_t)(c >> 1) << sh;
				sh += 7;
				if (!(c & 1))
					break;
				if (i > 15)
					return -1;
			}
		}
		f->cyc_acc += v;
		f->have_cyc = 1;
		return (int)i;
	}
	switch (b & 0x1f) {
	case 0x0d: case 0x11: case 0x01: case 0x1d: {
		unsigned ipc = b >> 5;
		unsigned len = ipc_len[ipc];
		if (len == 0xff)
			return -1;
		if (n < 1 + (size_t)len)
			return 0;
		int supp = ipc == 0;
		uint64_t ip = ip_reconstruct(f, ipc, p + 1);
		switch (b & 0x1f) {
		case 0x0d: on_tip(f, ip, supp); break;
		case 0x11: on_pge(f, ip, supp); break;
		case 0x01: on_pgd(f, ip, supp); break;
		default: on_fup(f, ip, supp); break;
		}
		return 1 + (int)len;
	}
	}
	switch (b) {
	case 0x19: /* TSC */
		if (n < 8)
			return 0;
		on_tsc(f, rd_le(p + 1, 7));
		return 8;
	case 0x59: /* MTC */
		if (n < 2)
			return 0;
		on_mtc(f, p[1]);
		return 2;
	case 0x99: /* MODE */
		if (n < 2)
			return 0;
		switch (p[1] >> 5) {
		case 0:
			on_mode_exec(f, p[1]);
			break;
		case 1:
			if (p[1] & 2) {
				f->tsx_abort = 1;
			}
			f->fup_status = 1;
			break;
		}
		return 2;
	case 0x02:
		break;
	default:
		if (f->in_bbp && (b & 7) == 4) {
			/* BIP inside a block (BBP .. BEP) */
			int sz = 1 + (f->bbp_sz ? 4 : 8);
			return n < (size_t)sz ? 0 : sz;
		}
		return -1;
	}
	if (n < 2)
		return 0;
	switch (p[1]) {
	case 0xa3: /* long TNT: 48-bit payload with stop bit */
		if (n < 8)
			return 0;
		{
			uint64_t v = rd_le(p + 2, 6);
			if (!v)
				return 8;
			unsigned hi = 63u - (unsigned)__builtin_clzll(v);
			on_tnt(f, v & ((1ull << hi) - 1), hi);
		}
		return 8;
	case 0x82: /* PSB */
		if (n < 16)
			return 0;
		if (memcmp(p, psb_pattern, 16))
			return -1;
		on_psb(f);
		return 16;
	case 0x23: /* PSBEND */
		on_psbend(f);
		return 2;
	case 0xf3: /* OVF */
		on_ovf(f);
		return 2;
	case 0x43: /* PIP */
		if (n < 8)
			return 0;
		{
			uint64_t v = rd_le(p + 2, 6);
			emit_event(f, BTR_FLOW_PAGING, 0, f->ip, (v >> 1) << 5);
		}
		return 8;
	case 0x83: /* TraceStop */
		emit_event(f, BTR_FLOW_STOP, 0, f->ip, 0);
		f->en = EN_OFF;
		f->pend = NULL;
		tnt_clear(f);
		return 2;
	case 0x03: /* CBR */
		return n < 4 ? 0 : 4;
	case 0x73: /* TMA */
		if (n < 7)
			return 0;
		on_tma(f, (uint16_t)rd_le(p + 2, 2), (uint16_t)(p[5] | ((p[6] & 1) << 8)));
		return 7;
	case 0xc8: /* VMCS */
		return n < 7 ? 0 : 7;
	case 0xc3: /* MNT */
		return n < 11 ? 0 : 11;
	case 0x62: case 0xe2: /* EXSTOP (IP bit: a FUP follows) */
		if (p[1] & 0x80)
			f->fup_status = 1;
		return 2;
	case 0xc2: /* MWAIT */
		return n < 10 ? 0 : 10;
	case 0x22: /* PWRE */
		return n < 4 ? 0 : 4;
	case 0xa2: /* PWRX */
		return n < 7 ? 0 : 7;
	case 0x63: /* BBP */
		if (n < 3)
			return 0;
		f->in_bbp = 1;
		f->bbp_sz = p[2] >> 7;
		return 3;
	case 0x33: case 0xb3: /* BEP */
		f->in_bbp = 0;
		return 2;
	case 0x13: /* CFE */
		return n < 4 ? 0 : 4;
	case 0x53: /* EVD */
		return n < 11 ? 0 : 11;
	default:
		if ((p[1] & 0x1f) == 0x12) {
			/* PTW: payload 4 or 8 bytes, IP bit: a FUP follows */
			unsigned sz = ((p[1] >> 5) & 3) == 0 ? 4 : ((p[1] >> 5) & 3) == 1 ? 8 : 0;
			if (!sz)
				return -1;
			if (n < 2 + (size_t)sz)
				return 0;
			if (p[1] & 0x80)
				f->fup_status = 1;
			emit_event(f, BTR_FLOW_PTWRITE, 0, f->ip, rd_le(p + 2, sz));
			return 2 + (int)sz;
		}
		return -1;
	}
}

/* Finds the next PSB in @p[0..n).  Returns its index or n. */
static size_t find_psb(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 16 <= n; i++) {
		const uint8_t *q = memchr(p + i, 0x02, n - i - 15);
		if (!q)
			return n;
		i = (size_t)(q - p);
		if (!memcmp(q, psb_pattern, 16))
			return i;
	}
	return n;
}

/* Runs the packets that start in @p[0..limit) (they may extend up to
 * @p[n]).  Returns the number of bytes consumed: less than @limit if a
 * packet is incomplete. */
static size_t run(struct btr_ptflow *f, const uint8_t *p, size_t n, size_t limit, uint64_t off)
{
	size_t i = 0;
	while (i < limit && !f->stopped) {
		if (btr_unlikely(!f->synced)) {
			size_t j = find_psb(p + i, n - i);
			if (j == n - i) {
				/* Keep up to 15 bytes: a PSB may straddle buffers. */
				size_t keep = n - i < 15 ? n - i : 15;
				return n - keep > i ? n - keep : i;
			}
			i += j;
			f->synced = 1;
		}
		f->pkt_off = off + i;
		uint8_t c = p[i];
		if (((!(c & 1) && c > 0x02) || (c == 0x02 && i + 8 <= n && p[i + 1] == 0xa3) ||
		     ((c & 0x1f) == 0x0d && (c >> 5) && !f->async_pending)) &&
		    f->en == EN_ON && !f->pend && !f->tq_cnt && !f->cb->insn) {
			/* TNT and TIP packets while the flow is known: walk
			 * straight from the packet bytes. */
			size_t used = i;
			int wr = walk_fast(f, p, n, limit, off, &used);
			if (btr_likely(used > i)) {
				i = used;
				if (wr < 0)
					gap(f, wr, f->ip);
				continue;
			}
		}
		int r = packet(f, p + i, n - i);
		if (btr_likely(r > 0)) {
			i += (size_t)r;
			continue;
		}
		if (r == 0)
			return i;
		/* Undecodable byte: a gap, then resync at the next PSB. */
		gap(f, -BTR_ERR_BAD_PACKET, f->ip);
		f->en = f->en == EN_OFF ? EN_OFF : EN_LOST;
		f->synced = 0;
		f->in_psb = 0;
		i++;
	}
	return i;
}

int btr_ptflow_decode(struct btr_ptflow *f, const uint8_t *buf, size_t size,
		      const struct btr_ptflow_callbacks *cb)
{
	if (!f || (!buf && size))
		return -BTR_ERR_INVAL;
	static const struct btr_ptflow_callbacks none;
	f->cb = cb ? cb : &none;
	f->stopped = 0;
	if (btr_image_generation(f->img) != f->img_gen) {
		/* The image changed since the last call: links would
		 * otherwise still lead to blocks of the old code. */
		flush_blocks(f, 1);
		f->img_gen = btr_image_generation(f->img);
	}
	if (f->pending_trunc_gap) {
		f->pending_trunc_gap = 0;
		f->pkt_off = f->off;
		emit_event(f, BTR_FLOW_GAP, -BTR_ERR_TRUNCATED, 0, 0);
	}
	f->st.bytes += size;
	size_t i = 0;
	if (f->carry_len) {
		/* Complete the packet cut at the previous buffer's end: run
		 * the carried bytes plus the start of @buf until a packet
		 * boundary lies inside @buf. */
		uint8_t tmp[sizeof(f->carry) + 32];
		size_t take = size < 32 ? size : 32;
		memcpy(tmp, f->carry, f->carry_len);
		memcpy(tmp + f->carry_len, buf, take);
		size_t tn = f->carry_len + take;
		size_t used = run(f, tmp, tn, f->carry_len, f->off - f->carry_len);
		if (used < f->carry_len) {
			/* Still incomplete (a tiny buffer): keep collecting. */
			size_t rest = tn - used;
			if (rest <= sizeof(f->carry)) {
				memmove(f->carry, tmp + used, rest);
				f->carry_len = (unsigned)rest;
				f->off += size;
				flush_branches(f);
				return f->stopped ? 1 : 0;
			}
			gap(f, -BTR_ERR_TRUNCATED, f->ip);
			f->synced = 0;
			used = tn;
		}
		i = used - f->carry_len;
		f->carry_len = 0;
	}
	if (!f->stopped && i < size) {
		size_t u = run(f, buf + i, size - i, size - i, f->off + i);
		i += u;
		if (i < size && !f->stopped) {
			size_t rest = size - i;
			if (rest <= sizeof(f->carry)) {
				memcpy(f->carry, buf + i, rest);
				f->carry_len = (unsigned)rest;
			}
		}
	}
	f->off += size;
	/* Nothing stays buffered between calls. */
	flush_branches(f);
	return f->stopped ? 1 : 0;
}

/* ---- parallel decoding ------------------------------------------------ */

/* A piece's output: the branch records exactly as the sequential
 * decoder delivers them (the workers' decoders batch them, and a batch
 * is one memcpy here; replay hands them on without conversion, in
 * batches to cb->branches), and the events with the number of branches
 * before each.  Small pieces keep this in the caches. */
struct piece {
	const uint8_t *buf;
	size_t size;         /* bytes of this piece */
	size_t tail;         /* bytes of the next piece's PSB+ to walk to its FUP */
	struct btr_branch *out;
	size_t n, cap;
	struct btr_flow_event *ev;
	size_t *evpos;       /* branches before event k */
	size_t nev, capev;
	int err;
	struct btr_ptflow *f;
	struct btr_ptflow_stats st;
	int tail_phase;
	int want_branch, want_event;
	uint64_t start_off;  /* stream offset of the piece */
	size_t head_len;     /* its leading PSB+ (the previous piece's tail) */
	int tail_on;         /* tracing was on at the end: the next PSB+ FUP is no new enable */
};

static int par_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	struct piece *pc = ctx;
	if (btr_unlikely(pc->cap - pc->n < n)) {
		size_t nc = pc->cap ? pc->cap : 4096;
		while (nc - pc->n < n)
			nc *= 2;
		struct btr_branch *no = realloc(pc->out, nc * sizeof(*no));
		if (!no) {
			pc->err = -BTR_ERR_NOMEM;
			return 1;
		}
		pc->out = no;
		pc->cap = nc;
	}
	memcpy(pc->out + pc->n, b, n * sizeof(*b));
	pc->n += n;
	return 0;
}

static int par_event(void *ctx, const struct btr_flow_event *e)
{
	struct piece *pc = ctx;
	/* In the tail (the next piece's PSB+) only the walk to its FUP
	 * belongs to us: that piece reports its own events. */
	if (pc->tail_phase)
		return 0;
	if (pc->nev == pc->capev) {
		size_t nc = pc->capev ? pc->capev * 2 : 64;
		struct btr_flow_event *ne = realloc(pc->ev, nc * sizeof(*ne));
		if (ne)
			pc->ev = ne;
		size_t *np = ne ? realloc(pc->evpos, nc * sizeof(*np)) : NULL;
		if (!np) {
			pc->err = -BTR_ERR_NOMEM;
			return 1;
		}
		pc->evpos = np;
		pc->capev = nc;
	}
	/* (the decoder delivered the branches before @e first) */
	pc->evpos[pc->nev] = pc->n;
	pc->ev[pc->nev++] = *e;
	return 0;
}

/* Delivers @n branch records. */
static int deliver(const struct btr_ptflow_callbacks *cb, const struct btr_branch *b, size_t n)
{
	if (cb->branches) {
		while (n) {
			size_t k = n < BTR_PTFLOW_BATCH ? n : BTR_PTFLOW_BATCH;
			if (cb->branches(cb->ctx, b, k))
				return 1;
			b += k;
			n -= k;
		}
		return 0;
	}
	if (cb->branch)
		for (size_t k = 0; k < n; k++)
			if (cb->branch(cb->ctx, &b[k]))
				return 1;
	return 0;
}

/* Delivers piece @pc's records.  With @quiet_head, the ENABLE and MODE
 * events of its leading PSB+ are dropped: the sequential decoder, which
 * was tracing there, reports none.  Returns 0 or 1 if a callback stopped. */
static int replay(const struct piece *pc, const struct btr_ptflow_callbacks *cb, int quiet_head)
{
	size_t k = 0;
	for (size_t e = 0; e <= pc->nev; e++) {
		size_t end = e < pc->nev ? pc->evpos[e] : pc->n;
		if (end > k && deliver(cb, pc->out + k, end - k))
			return 1;
		k = end;
		if (e == pc->nev)
			break;
		const struct btr_flow_event *ev = &pc->ev[e];
		if (quiet_head && (ev->type == BTR_FLOW_ENABLE || ev->type == BTR_FLOW_MODE) &&
		    ev->offset >= pc->start_off && ev->offset < pc->start_off + pc->head_len)
			continue;
		if (cb->event && cb->event(cb->ctx, ev))
			return 1;
	}
	return 0;
}

static void *par_worker(void *arg)
{
	struct piece *pc = arg;
	/* Buffer only what the caller wants: without a branch callback
	 * (statistics only) the workers run at full decoding speed. */
	struct btr_ptflow_callbacks cb = { .branches = pc->want_branch ? par_branches : NULL,
					   .event = pc->want_event ? par_event : NULL, .ctx = pc };
	struct btr_ptflow *f = pc->f;
	int r = btr_ptflow_decode(f, pc->buf, pc->size, &cb);
	pc->tail_on = f->en == EN_ON;
	if (r >= 0 && !pc->err && pc->tail) {
		/* Walk to the next piece's PSB+ FUP so that the direct jumps
		 * between the last branch and the PSB are not lost; then stop
		 * at the PSBEND (feed it packet by packet). */
		pc->tail_phase = 1;
		btr_ptflow_decode(f, pc->buf + pc->size, pc->tail, &cb);
	}
	btr_ptflow_stats(f, &pc->st);
	pc->st.bytes = pc->size;
	return NULL;
}

/* Length of the PSB+ starting at @p (through PSBEND), or 0. */
static size_t psb_plus_len(const uint8_t *p, size_t n)
{
	/* Parse with a throwaway decoder state: only sizes matter. */
	size_t i = 0;
	while (i < n) {
		if (i + 2 <= n && p[i] == 0x02 && p[i + 1] == 0x23)
			return i + 2;
		if (i + 2 <= n && p[i] == 0x02 && p[i + 1] == 0xf3)
			return i;  /* OVF ends PSB+ too; do not walk past it */
		/* sizes of the packets that may appear in PSB+ */
		uint8_t b = p[i];
		size_t sz;
		if (b == 0x00) sz = 1;
		else if (b == 0x02 && i + 1 < n && p[i + 1] == 0x82) sz = 16;
		else if (b == 0x02 && i + 1 < n && (p[i + 1] == 0x43)) sz = 8;
		else if (b == 0x02 && i + 1 < n && (p[i + 1] == 0x03)) sz = 4;
		else if (b == 0x02 && i + 1 < n && (p[i + 1] == 0x73 || p[i + 1] == 0xc8)) sz = 7;
		else if (b == 0x19) sz = 8;
		else if (b == 0x59 || b == 0x99) sz = 2;
		else if ((b & 0x1f) == 0x1d && ipc_len[b >> 5] != 0xff) sz = 1u + ipc_len[b >> 5];
		else if ((b & 3) == 3) {
			sz = 1;
			if (b & 4)
				while (i + sz < n && (p[i + sz++] & 1))
					;
		} else
			return 0;
		i += sz;
	}
	return 0;
}

/* Resets decoder @f to a fresh state for a piece starting at stream
 * offset @pos; the block cache is kept (it depends only on the image). */
static void reset_for_piece(struct btr_ptflow *f, uint64_t pos)
{
	struct blk *blks = f->blks, *cur = f->cur;
	struct blk_ref *idx = f->idx;
	struct btr_branch *bbuf = f->bbuf;
	uint32_t nblk = f->nblk;
	uint64_t bbuf_tsc = f->bbuf_tsc;
	uint8_t bbuf_dirty = f->bbuf_dirty;
	uint8_t *lens = f->lens;
	struct blk_cold *cold = f->cold;
	unsigned bits = f->cache_bits, gen = f->img_gen;
	struct btr_ptflow_config c = f->cfg;
	struct errata er = f->er;
	struct btr_image *img = f->img;
	memset(f, 0, sizeof(*f));
	f->blks = blks;
	f->cur = cur;
	f->idx = idx;
	f->bbuf = bbuf;
	f->nblk = nblk;
	f->rs_nolink = NIL;
	f->bbuf_tsc = bbuf_tsc;
	f->bbuf_dirty = bbuf_dirty;
	f->lens = lens;
	f->cold = cold;
	f->cache_bits = bits;
	f->img_gen = gen;
	f->cfg = c;
	f->er = er;
	f->img = img;
	f->off = pos;
}

void btr_ptflow_reset(struct btr_ptflow *f, uint64_t offset)
{
	if (!f)
		return;
	int was_on = f->en != EN_OFF;
	struct btr_ptflow_stats st = f->st;
	reset_for_piece(f, offset);
	f->st = st;
	f->pending_trunc_gap = (uint8_t)was_on;
}

/* Pipelined parallel decoding: worker threads claim pieces in stream
 * order and decode them into slots (2 per worker); the calling thread
 * delivers the slots' buffered output in order and frees them.  Memory
 * is bounded by the slots. */
enum { SLOT_FREE, SLOT_BUSY, SLOT_DONE };

struct par {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const uint8_t *buf;
	size_t size, chunk, next_pos;
	uint64_t next_idx;
	struct piece *slots;
	int want_branch, want_event;
	uint64_t *slot_idx;
	int *slot_state;
	unsigned nslots;
	int abort;
};

struct par_thread {
	struct par *p;
	struct btr_ptflow *f;
	pthread_t th;
	int started;
};

static void *par_thread_main(void *arg)
{
	struct par_thread *t = arg;
	struct par *p = t->p;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		if (p->abort || p->next_pos >= p->size)
			break;
		uint64_t idx = p->next_idx;
		unsigned si = (unsigned)(idx % p->nslots);
		if (p->slot_state[si] != SLOT_FREE) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		/* Cut the next piece at a PSB. */
		size_t pos = p->next_pos, end = pos + p->chunk;
		if (end >= p->size)
			end = p->size;
		else
			end += find_psb(p->buf + end, p->size - end);
		p->next_pos = end;
		p->next_idx++;
		p->slot_state[si] = SLOT_BUSY;
		p->slot_idx[si] = idx;
		struct piece *pc = &p->slots[si];
		pthread_mutex_unlock(&p->mu);

		pc->buf = p->buf + pos;
		pc->size = end - pos;
		pc->tail = end < p->size ? psb_plus_len(p->buf + end, p->size - end) : 0;
		pc->n = 0;
		pc->nev = 0;
		pc->err = 0;
		pc->tail_phase = 0;
		pc->start_off = pos;
		pc->head_len = pos ? psb_plus_len(p->buf + pos, p->size - pos) : 0;
		pc->want_branch = p->want_branch;
		pc->want_event = p->want_event;
		pc->f = t->f;
		reset_for_piece(t->f, pos);
		par_worker(pc);

		pthread_mutex_lock(&p->mu);
		p->slot_state[si] = SLOT_DONE;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int btr_ptflow_decode_parallel(struct btr_image *img, const struct btr_ptflow_config *cfg,
			       const uint8_t *buf, size_t size, unsigned nthreads, size_t chunk,
			       const struct btr_ptflow_callbacks *cb, struct btr_ptflow_stats *st)
{
	if (!img || (!buf && size) || !cb)
		return -BTR_ERR_INVAL;
	if (cb->insn)
		return -BTR_ERR_UNSUPPORTED;
	if (nthreads < 1)
		nthreads = 1;
	if (nthreads > 64)
		nthreads = 64;
	if (!chunk)
		chunk = 16u << 10;  /* small pieces: their buffered output stays in cache */
	if (st)
		memset(st, 0, sizeof(*st));

	struct par p;
	memset(&p, 0, sizeof(p));
	p.buf = buf;
	p.size = size;
	p.chunk = chunk;
	p.nslots = 2 * nthreads;
	p.want_branch = cb->branch != NULL || cb->branches != NULL;
	p.want_event = cb->event != NULL;
	p.slots = calloc(p.nslots, sizeof(*p.slots));
	p.slot_idx = calloc(p.nslots, sizeof(*p.slot_idx));
	p.slot_state = calloc(p.nslots, sizeof(*p.slot_state));
	struct par_thread *ts = calloc(nthreads, sizeof(*ts));
	int ret = 0;
	if (!p.slots || !p.slot_idx || !p.slot_state || !ts) {
		ret = -BTR_ERR_NOMEM;
		goto out;
	}
	for (unsigned t = 0; t < nthreads; t++) {
		ts[t].p = &p;
		int e = btr_ptflow_new(img, cfg, &ts[t].f);
		if (e) {
			ret = e;
			goto out;
		}
	}
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	unsigned started = 0;
	for (unsigned t = 0; t < nthreads; t++) {
		if (pthread_create(&ts[t].th, NULL, par_thread_main, &ts[t]) == 0) {
			ts[t].started = 1;
			started++;
		}
	}
	if (!started) {
		ret = -BTR_ERR_NOMEM;
		goto out_sync;
	}
	/* Deliver pieces in order. */
	int prev_tail_on = 0;
	for (uint64_t idx = 0;; idx++) {
		unsigned si = (unsigned)(idx % p.nslots);
		pthread_mutex_lock(&p.mu);
		while (!(p.slot_state[si] == SLOT_DONE && p.slot_idx[si] == idx)) {
			if (p.next_pos >= p.size && idx >= p.next_idx)
				break;
			pthread_cond_wait(&p.cv, &p.mu);
		}
		int done = !(p.slot_state[si] == SLOT_DONE && p.slot_idx[si] == idx);
		pthread_mutex_unlock(&p.mu);
		if (done)
			break;
		struct piece *pc = &p.slots[si];
		if (pc->err && !ret)
			ret = pc->err;
		if (!ret)
			ret = replay(pc, cb, prev_tail_on);
		prev_tail_on = pc->tail_on;
		if (st) {
			st->insns += pc->st.insns;
			st->branches += pc->st.branches;
			st->gaps += pc->st.gaps;
			st->bytes += pc->st.bytes;
			st->overflows += pc->st.overflows;
			st->blocks_decoded += pc->st.blocks_decoded;
			for (int k = 0; k < BTR_KIND__COUNT; k++)
				st->by_kind[k] += pc->st.by_kind[k];
		}
		pthread_mutex_lock(&p.mu);
		p.slot_state[si] = SLOT_FREE;
		if (ret)
			p.abort = 1;
		pthread_cond_broadcast(&p.cv);
		pthread_mutex_unlock(&p.mu);
		if (ret)
			break;
	}
out_sync:
	pthread_mutex_lock(&p.mu);
	p.abort = 1;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	for (unsigned t = 0; t < nthreads; t++)
		if (ts[t].started)
			pthread_join(ts[t].th, NULL);
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
out:
	if (ts)
		for (unsigned t = 0; t < nthreads; t++)
			btr_ptflow_free(ts[t].f);
	if (p.slots)
		for (unsigned k = 0; k < p.nslots; k++) {
			free(p.slots[k].out);
			free(p.slots[k].ev);
			free(p.slots[k].evpos);
		}
	free(p.slots);
	free(p.slot_idx);
	free(p.slot_state);
	free(ts);
	return ret;
}
