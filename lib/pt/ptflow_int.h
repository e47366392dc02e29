/* ptflow_int.h - internals shared by the flow decoder's files:
 * ptflow.c (packet handlers, the event state machine, the public entry points),
 * ptflow_walk.c (block cache and the walks over it), ptflow_par.c (parallel driver).
 * Not a public header. */
#ifndef BTR_PTFLOW_INT_H
#define BTR_PTFLOW_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "btr/ptflow.h"
#include "btr/error.h"
#include "internal.h"
#include "pt_opcodes.h"

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
	uint8_t keep;         /* KEEP_*: which records of the block walk_fast's omode 4
			       * keeps (cb->fold_block) */
	uint8_t cls;          /* enum blk_class */
	uint8_t kind;         /* enum btr_branch_kind of the last instruction */
	uint8_t mode;         /* enum btr_exec_mode + 1; 0 = not a valid block */
	uint8_t jcc;          /* cls == C_COND and kind == BTR_KIND_JCC (the hot case) */
};
_Static_assert(sizeof(struct blk) == 64, "one cache line per block");
/* blk.keep: with cb->fold_ok saying yes, the block's JCC record with TNT
 * bit t goes out if bit t is set (KEEP_NT: not taken, KEEP_TK: taken; a
 * JMP's if KEEP_TK).  Without cb->fold_block every block has KEEP_TK: the
 * not-taken JCCs are left out. */
#define KEEP_NT 1u
#define KEEP_TK 2u

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
extern const struct blk btr_ptflow_blk_nil_;
#define NIL ((struct blk *)&btr_ptflow_blk_nil_)

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
		skl168 : 1, apl12 : 1, apl11 : 1, skz84 : 1;
};

/* What the overflow errata make of an OVF (ptflow_errata.c). */
enum { PTF_OVF_NORMAL, PTF_OVF_OFF, PTF_OVF_AT_IP };
struct ptf_ovf_fix {
	uint8_t action;   /* PTF_OVF_*: decode as without an erratum; resume
			   * after @skip bytes with tracing off; or resume
			   * after @skip bytes, enabled at @ip */
	uint8_t has_tsx;  /* PTF_OVF_AT_IP: a MODE.TSX (bits @tsx: 1 InTX, 2
			   * abort) binds to the FUP at @skip */
	uint8_t tsx;
	size_t skip;      /* bytes after the OVF to drop */
	uint64_t ip;
	uint64_t last_ip; /* the decoder's last IP after the skipped bytes */
};
/* Applies the overflow errata of @er (SKD010, APL11, APL12) to the @n
 * bytes @p that follow an OVF.  Fills *@x (never fails). */
void ptf_ovf_errata(const struct errata *er, const uint8_t *p, size_t n, struct ptf_ovf_fix *x);

#define TNTQ 8   /* TNT packets queued at most (deferred TIPs need 2) */
#define RETSTACK 64
#define WALK_LIMIT (1u << 20) /* blocks walked without trace before we call it a loop */

struct btr_ptflow {
	/* ---- kept by a reset (ptf_reset_for_piece): the image, the
	 * configuration and the caches, which depend only on the image, and
	 * the output buffers.  A new cache or table goes here. ---- */
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
	uint32_t nblk_hi;     /* blocks written since they were last all cleared:
			       * an image change clears only these */
	struct btr_image *next_img; /* btr_ptflow_set_image during a decode: taken
				     * at the next safe point (ptf_take_image) */
	struct blk *cur;      /* the block at ip when a walk stopped (validated by ip/mode) */
	struct btr_branch *bbuf; /* batched branch records (cb->branches) */
	/* Every record in bbuf has .tsc = bbuf_tsc, .tid = cfg.tid and
	 * .cycles = 0 unless bbuf_dirty (then the flush restores it): the
	 * hot loop writes only from, to, insns, flags and kind. */
	uint64_t bbuf_tsc;
	uint8_t bbuf_dirty;
	/* cb->counts (btr/ptflow.h): two counters per block (executions of
	 * its branch to to[0] / to[1] since they were last reported), the
	 * list of counters that became nonzero (block * 2 + link), and the
	 * ordered records (count 1) not yet delivered.  Allocated at the
	 * first decode with cb->counts. */
	uint64_t *cnt;
	uint64_t *xt;         /* per block: the target the second counter of an
			       * indirect branch (C_IND, C_RET) counts */
	uint32_t *dirty;
	uint32_t nd;
	struct btr_branch_count *cbuf;
	unsigned cn;

	/* ---- cleared by a reset: everything from here on (the decode in
	 * progress, the flow, the packet state, the statistics) ---- */
	char reset_from[0];
	uint8_t in_decode;    /* inside btr_ptflow_decode (callbacks may run) */
	unsigned bn;          /* records in bbuf */
	uint64_t fw_nonjcc;   /* walk_fast: TNT bits consumed by other than JCC */
	uint64_t rstart;      /* counts: start of the current straight-line run, 0 unknown */
	uint8_t run_ordered;  /* counts: a transaction ended, its next branch goes out in order */

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
	uint8_t tsx_pend;        /* MODE.TSX begin/commit seen: 1 + InTX, reported at its FUP's IP */
	uint8_t after_ovf;       /* OVF seen: the next FUP is the resume IP */
	uint8_t intx;            /* inside a TSX transaction (BTR_BF_IN_TX) */
	uint8_t fold;            /* cb->fold_ok said yes (walk_fast leaves out not-taken JCCs) */
	uint64_t folded;         /* branches left out so far (btr_ptflow_folded) */
	/* the cb->fold_block (and its ctx) the cached blocks' keep answers */
	int (*ft_fn)(void *ctx, uint64_t start, uint64_t from, uint64_t to);
	void *ft_ctx;
	uint64_t tx_insns;       /* st.insns when the transaction began */
	uint8_t in_psb;
	uint8_t psb_fup;         /* FUP seen in this PSB+ */
	uint8_t psb_on;          /* tracing was on (flow known) when this PSB+ began */
	uint8_t synced;          /* a PSB was found */
	uint8_t stopped;         /* a callback asked to stop */
	uint8_t in_bbp;
	uint8_t pending_trunc_gap; /* btr_ptflow_reset while tracing: report the hole */
	uint8_t unsure;          /* a gap since the last PSB: the flow resumed at an IP
				  * packet, without the state a PSB restores */
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

/* ---- across the files ------------------------------------------------- */

/* The files call downwards only: ptflow_par.c -> ptflow.c (packets,
 * state, events) -> ptflow_walk.c (blocks, walks) -> ptflow_out.c
 * (branch batches, instructions to the callbacks). */

/* ptflow_out.c */
void ptf_bbuf_fill(struct btr_ptflow *f, unsigned from);
void ptf_flush_branches(struct btr_ptflow *f);
int ptf_counts_alloc(struct btr_ptflow *f);
void ptf_counts_free(struct btr_ptflow *f);
int ptf_count_one(struct btr_ptflow *f, uint64_t start, const struct btr_branch *b);
void ptf_flush_counts(struct btr_ptflow *f);
void ptf_emit_insns(struct btr_ptflow *f, const struct blk *b, unsigned n);

/* ptflow.c */
void ptf_emit_event(struct btr_ptflow *f, enum btr_flow_event_type t, int reason,
		    uint64_t ip, uint64_t payload);
void ptf_tnt_clear(struct btr_ptflow *f);
void ptf_apply_next_mode(struct btr_ptflow *f);
void ptf_on_tip(struct btr_ptflow *f, uint64_t ip, int suppressed);
size_t ptf_find_psb(const uint8_t *p, size_t n);
void ptf_reset_for_piece(struct btr_ptflow *f, uint64_t pos);
void ptf_take_image(struct btr_ptflow *f);
int ptf_packet(struct btr_ptflow *f, const uint8_t *p, size_t n);

/* ptflow_walk.c */
struct blk *ptf_build_blk(struct btr_ptflow *f, uint64_t ip, int *err);
void ptf_flush_blocks(struct btr_ptflow *f, int image_changed);

enum goal {
	G_TNT,   /* consume queued TNT bits; stop when none are left */
	G_TIP,   /* reach the next indirect transfer; it goes to @x */
	G_FUP,   /* reach instruction @x (not executed) */
	G_PGD,   /* reach the branch the TIP.PGD binds to; @x target (or suppressed) */
	G_PIP,   /* reach and execute the MOV CR3 a PIP binds to; stop before a far transfer */
};
int ptf_walk(struct btr_ptflow *f, enum goal goal, uint64_t x, int suppressed, struct blk **endp);
int ptf_walk_fast(struct btr_ptflow *f, const uint8_t *p, size_t n, size_t limit, uint64_t off,
		  size_t *pos);

/* ---- output ----------------------------------------------------------- */

/* Privilege from the address: the upper canonical half is the kernel's
 * on Linux x86-64 (PT itself does not say; CPL filtering does). */
#define KFLAGS(from, to) ((unsigned)(((from) >> 63) << 1) | (unsigned)(((to) >> 63) << 8))
_Static_assert(BTR_BF_KERNEL == 1u << 1 && BTR_BF_TO_KERNEL == 1u << 8, "KFLAGS bit positions");

static inline void emit_branch(struct btr_ptflow *f, uint64_t from, uint64_t to,
			       unsigned kind, unsigned flags)
{
	f->st.branches++;
	f->st.by_kind[kind]++;
	if (!f->cb || (!f->cb->branch && !f->cb->branches && !f->cb->counts)) {
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
	b.pid = f->cfg.pid;
	flags |= BTR_BF_INSNS | KFLAGS(from, to) | (f->intx ? BTR_BF_IN_TX : 0);
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
	if (f->cb->counts) {
		/* one ordered record of the counts (ptflow_out.c) */
		uint64_t start = f->rstart;
		f->rstart = to;
		f->run_ordered = 0;
		if (ptf_count_one(f, start, &b))
			f->stopped = 1;
		return;
	}
	if (f->cb->branches) {
		f->bbuf_dirty = 1;
		f->bbuf[f->bn++] = b;
		if (f->bn == BTR_PTFLOW_BATCH)
			ptf_flush_branches(f);
		return;
	}
	if (f->cb->branch(f->cb->ctx, &b))
		f->stopped = 1;
}

/* Executes all of block @b (its instructions are reported). */
static inline void exec_blk(struct btr_ptflow *f, const struct blk *b)
{
	f->st.insns += b->ninsn;
	f->since += b->ninsn;
	if (btr_unlikely(f->cb && f->cb->insn))
		ptf_emit_insns(f, b, b->ninsn);
}

/* ---- block decoding --------------------------------------------------- */

/* First entry of @ip's index set. */
static inline size_t blk_set(const struct btr_ptflow *f, uint64_t ip)
{
	return (size_t)((ip * 0x9E3779B97F4A7C15ull) >> (64 - f->cache_bits)) & ~(size_t)(WAYS - 1);
}




static inline struct blk *lookup(struct btr_ptflow *f, uint64_t ip, int *err)
{
	const struct blk_ref *set = &f->idx[blk_set(f, ip)];
	uint32_t m = f->mode + 1u;
	for (unsigned w = 0; w < WAYS; w++)
		if (btr_likely(set[w].ip == ip && set[w].mode == m && set[w].ref))
			return &f->blks[set[w].ref - 1];
	return ptf_build_blk(f, ip, err);
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

/* Defers block @b until its TIP arrives (a copy: the cache may drop @b). */
static inline void ptf_set_pend(struct btr_ptflow *f, struct blk *b)
{
	f->pend_copy = *b;
	f->pend = &f->pend_copy;
}

static inline uint64_t rd_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* IP payload bytes per compression, 0xff for the reserved ones. */
static const uint8_t ipc_len[8] = {
	PT_IPC_LEN(0), PT_IPC_LEN(1), PT_IPC_LEN(2), PT_IPC_LEN(3),
	PT_IPC_LEN(4), PT_IPC_LEN(5), PT_IPC_LEN(6), PT_IPC_LEN(7),
};

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

#endif
