/* btr_qemu_system.c - the QEMU TCG plugin for whole-system recording
 * (`btr record --system`, docs/record.md): loaded into qemu-system-x86_64
 * (plugin API v4, QEMU 10), it writes the guest's control flow, kernel and
 * user code alike, as Intel PT into a .btr file, the way the CPU would:
 *   - TNT for conditional branches, TIP for indirect branches and far
 *     transfers (no return compression: every RET is a TIP);
 *   - interrupts and exceptions as FUP (the IP the guest resumes at, or the
 *     faulting instruction) + TIP (the handler);
 *   - PIP at every MOV CR3 while tracing, MODE.Exec before every TIP.PGE
 *     and in every PSB+;
 *   - CPL filtering (filter=user: CPL 3, filter=kernel: CPL 0) as
 *     TIP.PGD / TIP.PGE at the boundaries.
 * Code bytes are written as CODE records at translation time (the guest's
 * memory holds no file the decoder could read), content-addressed as the
 * user-mode plugin writes JIT code (lib/image/codepages.h); the kernel's
 * System.map gives SYMBOL records and the interrupt and exception entry
 * points.
 *
 * How an event is told from a branch: QEMU delivers interrupts only
 * between TBs and exceptions mid-TB, and neither calls the plugin.  Every
 * instruction stores its address in a per-vCPU slot before it runs
 * (inline, no call), so at the next TB we know the last instruction that
 * started.  When the next TB is an interrupt or exception entry (from
 * System.map), the return frame the CPU pushed on the handler's stack
 * gives the IP the guest resumes at: the faulting instruction, or the
 * successor of the completed TB (which also decides a conditional or
 * indirect branch right before the event).
 *
 * Guest registers (cr3, cs, rsp) are read only at those events and after
 * far transfers and MOV CR3, never per TB.  Tracing starts at the kernel's
 * first instruction in the upper half (the firmware, the setup code and
 * the decompressor before it are not traced).
 *
 * Arguments: out=FILE (the .btr written), filter=all|user|kernel,
 * sysmap=FILE (the guest kernel's System.map; needed), cmd=NAME (named in
 * the PROCESS record).  One vCPU (-smp 1).
 *
 * Not library code (agents/qemu-system/CMakeLists.txt); the PT encoder,
 * the instruction decoder and the trace writer are libbtr's. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "btr/error.h"
#include "btr/insn.h"
#include "btr/pt.h"
#include "btr/trace.h"
#include "image/codepages.h"

#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#include "qemu_plugin_api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = BTR_QEMU_PLUGIN_VERSION_NEW;

/* ---- QEMU 10's plugin API (v4) beyond agents/qemu/qemu_plugin_api.h ---- */
typedef struct { char *data; unsigned len; } btr_garray;        /* GArray */
typedef struct { uint8_t *data; unsigned len; } btr_gbytes;     /* GByteArray */
struct qemu_plugin_register;
typedef struct {
	struct qemu_plugin_register *handle;
	const char *name;
	const char *feature;
} qemu_plugin_reg_descriptor;
/* (scoreboards and per-vcpu inline operations: qemu_plugin_api.h) */
btr_garray *qemu_plugin_get_registers(void);
int qemu_plugin_read_register(struct qemu_plugin_register *handle, btr_gbytes *buf);
void *qemu_plugin_scoreboard_find(struct qemu_plugin_scoreboard *score, unsigned int vcpu_index);
/* glib, from the QEMU process */
btr_gbytes *g_byte_array_new(void);
btr_gbytes *g_byte_array_set_size(btr_gbytes *array, unsigned length);
char *g_array_free(btr_garray *array, int free_segment);

_Bool btr_read_vaddr(uint64_t addr, btr_gbytes *data, size_t len) __asm__("qemu_plugin_read_memory_vaddr")
	__attribute__((weak, visibility("default")));

#define PID 1                      /* the machine is one "process" in the trace */
#define TID 1
#define PSB_PERIOD 4096
#define KERNEL_HALF 0xffff800000000000ull

/* TB start: not an entry, an entry (the return IP on top of the stack),
 * one with an error code above it, one of either (the early IDT's stubs). */
enum { H_NONE, H_ENTRY, H_ENTRY_ERR, H_ENTRY_ANY };
enum { F_REP = 1, F_CR3 = 2, F_FAR = 4 };

struct tb {
	uint64_t pc, end, last_pc, target;
	uint8_t kind, flags, handler;
	uint32_t len;        /* user code: its bytes, and the CODE generation */
	uint64_t gen;        /* they were last known to be the trace's */
	uint64_t ran_at;     /* ... at this address */
	uint8_t *bytes;
};

static struct {
	struct btr_trace_writer *w;
	int filter;                    /* 0 all, 1 user, 2 kernel */
	struct btr_pt_encoder enc;
	struct btr_pt_tnt_acc tnt;
	uint8_t buf[1 << 20];
	uint64_t flushed, last_psb;
	struct tb *prev;
	uint64_t prev_delta;           /* where it ran minus where it was translated */
	int started, enabled;          /* tracing begun; PacketEn */
	unsigned cpl;
	uint64_t cr3, pip_cr3;
	struct qemu_plugin_register *r_cr3, *r_cs, *r_rsp, *r_rip;
	btr_gbytes *rb;
	struct qemu_plugin_scoreboard *sb;   /* per vCPU: address of the last instruction started */
	/* System.map */
	struct ent { uint64_t lo, hi; uint8_t kind; } *ents;
	size_t n_ents;
	struct codepages *told;
	uint8_t code[1 << 16];
	uint64_t n_code, n_events, n_tb;
	uint64_t code_gen;             /* CODE records of user code written */
	int err;
} g;

/* ---- the trace ---- */

static void write_rec(const struct btr_record *r)
{
	if (g.w && btr_trace_write(g.w, r) < 0 && !g.err)
		g.err = btr_trace_writer_error(g.w);
}

static void pt_flush(void)
{
	btr_pt_tnt_flush(&g.enc, &g.tnt);
	size_t n = btr_pt_enc_size(&g.enc);
	if (!n)
		return;
	struct btr_record r = { .type = BTR_REC_PT };
	r.u.data.tid = TID;
	r.u.data.cpu = -1;
	r.u.data.stream_offset = g.flushed;
	r.u.data.size = n;
	r.u.data.data = g.enc.begin;
	write_rec(&r);
	g.flushed += n;
	g.enc.pos = g.enc.begin;   /* keeps last_ip: the stream goes on */
}

static uint64_t stream_pos(void)
{
	return g.flushed + btr_pt_enc_size(&g.enc);
}

static void tnt_flush(void)
{
	btr_pt_tnt_flush(&g.enc, &g.tnt);
}

static void pkt(enum btr_pt_type type)
{
	struct btr_pt_packet p = { .type = type };
	if (type == BTR_PT_MODE_EXEC)
		p.u.mode_exec.csl = 1;   /* only 64-bit code is traced */
	if (type == BTR_PT_PIP)
		p.u.pip.cr3 = g.cr3;
	if (type == BTR_PT_TIP_PGD)
		p.u.ip.ipc = BTR_PT_IPC_SUPPRESSED;
	btr_pt_enc_packet(&g.enc, &p);
}

static void ip_pkt(enum btr_pt_type type, uint64_t ip)
{
	tnt_flush();
	btr_pt_enc_ip(&g.enc, type, ip);
}

static int kernel_traced(void)
{
	return g.filter != 1;
}

/* PSB+: PSB, PIP (when the kernel is traced), MODE.Exec, FUP while
 * PacketEn, PSBEND. */
static void psb(uint64_t ip)
{
	tnt_flush();
	g.last_psb = stream_pos();
	pkt(BTR_PT_PSB);
	g.enc.last_ip = 0;
	if (kernel_traced()) {
		pkt(BTR_PT_PIP);
		g.pip_cr3 = g.cr3;
	}
	pkt(BTR_PT_MODE_EXEC);
	if (g.enabled)
		btr_pt_enc_ip(&g.enc, BTR_PT_FUP, ip);
	pkt(BTR_PT_PSBEND);
}

/* ---- registers ---- */

static uint64_t reg(struct qemu_plugin_register *r)
{
	if (!r)
		return 0;
	g_byte_array_set_size(g.rb, 0);
	int n = qemu_plugin_read_register(r, g.rb);
	uint64_t v = 0;
	if (n > 0)
		memcpy(&v, g.rb->data, n < 8 ? (size_t)n : 8);
	return v;
}

static int read_u64(uint64_t addr, uint64_t *v)
{
	if (!btr_read_vaddr)
		return -1;
	g_byte_array_set_size(g.rb, 0);
	if (!btr_read_vaddr(addr, g.rb, 8) || g.rb->len < 8)
		return -1;
	memcpy(v, g.rb->data, 8);
	return 0;
}

/* Reads CPL and CR3; says whether packets should be on. */
static int want_on(void)
{
	g.cpl = (unsigned)reg(g.r_cs) & 3;
	g.cr3 = reg(g.r_cr3);
	return g.filter == 0 || (g.filter == 1 && g.cpl == 3) || (g.filter == 2 && g.cpl == 0);
}

/* After a far transfer, event or MOV CR3 to @pc: PIP, TIP.PGE/PGD.
 * @tip: the transfer's TIP is still to be written (far branch, event). */
static void transfer(uint64_t pc, int tip)
{
	int on = want_on();
	if (g.enabled && on) {
		if (g.cr3 != g.pip_cr3 && kernel_traced()) {
			tnt_flush();
			pkt(BTR_PT_PIP);
			g.pip_cr3 = g.cr3;
		}
		if (tip)
			ip_pkt(BTR_PT_TIP, pc);
	} else if (g.enabled && !on) {
		tnt_flush();
		pkt(BTR_PT_TIP_PGD);
		g.enabled = 0;
	} else if (!g.enabled && on) {
		tnt_flush();
		if (g.cr3 != g.pip_cr3 && kernel_traced()) {
			pkt(BTR_PT_PIP);
			g.pip_cr3 = g.cr3;
		}
		pkt(BTR_PT_MODE_EXEC);
		ip_pkt(BTR_PT_TIP_PGE, pc);
		g.enabled = 1;
	}
}

/* ---- events and branches ---- */

static int is_succ(const struct tb *p, uint64_t ip)
{
	switch (p->kind) {
	case BTR_KIND_NONE:
		return ip == p->end || ((p->flags & F_REP) && ip == p->last_pc);
	case BTR_KIND_JMP:
	case BTR_KIND_CALL:
		return ip == p->target;
	case BTR_KIND_JCC:
	case BTR_KIND_LOOP:
	case BTR_KIND_JRCXZ:
		return ip == p->target || ip == p->end;
	case BTR_KIND_INT:
	case BTR_KIND_INT3:
		return 0;   /* always to a handler (event()) */
	default:
		return 1;   /* indirect and far: anywhere */
	}
}

/* @p completed and went to @ip: its branch's packet. */
static void branch(const struct tb *p, uint64_t ip)
{
	if (!g.enabled)
		return;
	switch (p->kind) {
	case BTR_KIND_JCC:
	case BTR_KIND_LOOP:
	case BTR_KIND_JRCXZ:
		btr_pt_tnt_add(&g.enc, &g.tnt, ip == p->target);
		break;
	case BTR_KIND_RET:
	case BTR_KIND_JMP_IND:
	case BTR_KIND_CALL_IND:
		ip_pkt(BTR_PT_TIP, ip);
		break;
	default:
		break;
	}
}

/* The TB @cur starts an interrupt or exception handler; @p ran before. */
static void event(struct tb *p, struct tb *cur, uint64_t last)
{
	uint64_t rsp = reg(g.r_rsp), rip = last, c0 = 0, c1 = 0;
	g.n_events++;
	int ok0 = read_u64(rsp, &c0) == 0, ok1 = read_u64(rsp + 8, &c1) == 0;
	if (cur->handler == H_ENTRY && ok0)
		rip = c0;
	else if (cur->handler == H_ENTRY_ERR && ok1)
		rip = c1;
	else if (cur->handler == H_ENTRY_ANY)
		rip = ok1 && (c1 == last || (p && is_succ(p, c1) && p->kind != BTR_KIND_RET &&
					    p->kind != BTR_KIND_JMP_IND && p->kind != BTR_KIND_CALL_IND)) ? c1 : c0;
	uint64_t fup;
	if (p && (last != p->last_pc || !is_succ(p, rip)) && rip == last) {
		fup = last;                    /* a fault: @last did not complete */
	} else if (p && last == p->last_pc && (p->kind == BTR_KIND_INT || p->kind == BTR_KIND_INT3) &&
		   rip == p->end) {
		transfer(cur->pc, 1);          /* INT n / INT3 itself: a far branch, TIP only */
		return;
	} else {
		if (p && last == p->last_pc) {
			if (p->flags & F_FAR)
				transfer(rip, 1);      /* e.g. SYSRET, then an interrupt */
			else
				branch(p, rip);
		}
		fup = rip;
	}
	if (g.enabled) {
		ip_pkt(BTR_PT_FUP, fup);
		if (!want_on()) {
			pkt(BTR_PT_TIP_PGD);
			g.enabled = 0;
		} else {
			if (g.cr3 != g.pip_cr3 && kernel_traced()) {
				pkt(BTR_PT_PIP);
				g.pip_cr3 = g.cr3;
			}
			ip_pkt(BTR_PT_TIP, cur->pc);
		}
	} else {
		transfer(cur->pc, 1);
	}
}

static void code_put(uint64_t pc, const uint8_t *bytes, size_t len);

/* @b as it runs at @delta from where it was translated. */
static void shifted(struct tb *out, const struct tb *b, uint64_t delta)
{
	*out = *b;
	out->pc += delta;
	out->end += delta;
	out->last_pc += delta;
	if (b->kind == BTR_KIND_NONE || (b->kind >= BTR_KIND_JCC && b->kind <= BTR_KIND_CALL) ||
	    b->kind == BTR_KIND_JMP)
		out->target += delta;   /* PC-relative */
}

static void tb_exec(unsigned vcpu, void *ud)
{
	struct tb *cur = ud, *p = g.prev, pe, ce;
	uint64_t pd = g.prev_delta, delta = 0;
	g.n_tb++;
	if (vcpu != 0)
		return;
	/* QEMU's x86-64 TBs are position-independent (CF_PCREL): one
	 * translated for a physical page runs at every virtual address that
	 * maps it (a shared library in two processes, kernel code first run
	 * through the boot's identity map).  The vaddr of translation is the
	 * kernel's own for a TB of the upper half (its text is mapped once);
	 * for any other the guest's RIP says where it runs. */
	if (cur->pc < KERNEL_HALF && g.started)
		delta = reg(g.r_rip) - cur->pc;
	g.prev = cur;
	g.prev_delta = delta;
	uint64_t pc = cur->pc + delta;
	uint64_t last = *(uint64_t *)qemu_plugin_scoreboard_find(g.sb, vcpu) + pd;
	if (!g.started) {
		/* Tracing begins in the kernel proper (the upper half): the
		 * firmware, the setup code and the decompressor before it are
		 * not traced. */
		if (pc < KERNEL_HALF)
			return;
		g.started = 1;
		g.enabled = 0;
		int on = want_on();
		psb(pc);            /* PSB, PIP, MODE.Exec, PSBEND */
		if (on) {
			ip_pkt(BTR_PT_TIP_PGE, pc);
			g.enabled = 1;
		}
		return;
	}
	/* The bytes @cur runs go into the trace before the packet that
	 * leads to them (a decoder walks on from a branch's target at once). */
	if (cur->bytes && UNLIKELY(cur->gen != g.code_gen || cur->ran_at != pc)) {
		/* another process's code was there, or it runs elsewhere */
		code_put(pc, cur->bytes, cur->len);
		cur->gen = g.code_gen;
		cur->ran_at = pc;
	}
	if (p) {
		shifted(&pe, p, pd);
		p = &pe;
	}
	shifted(&ce, cur, delta);
	if (cur->handler) {
		event(p, &ce, last);
	} else if (p && last == p->last_pc) {
		if (p->flags & F_FAR) {
			transfer(pc, 1);
		} else if (is_succ(p, pc)) {
			branch(p, pc);
			if (p->flags & F_CR3)
				transfer(pc, 0);
		} else if (g.enabled) {
			/* An unexpected successor: say it as an event. */
			uint64_t at = p->kind == BTR_KIND_NONE ? p->end : p->target;
			g.n_events++;
			ip_pkt(BTR_PT_FUP, at);
			ip_pkt(BTR_PT_TIP, pc);
		}
	}
	/* else: @p left early and went on in order (nothing branched) */
	if (g.enc.end - g.enc.pos < 4096)
		pt_flush();
	if (stream_pos() - g.last_psb >= PSB_PERIOD) {
		psb(pc);
		if (g.enc.end - g.enc.pos < 4096)
			pt_flush();
	}
}

/* ---- translation ---- */

static int ent_cmp(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static uint8_t handler_at(uint64_t pc)
{
	size_t lo = 0, hi = g.n_ents;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (g.ents[m].hi <= pc)
			lo = m + 1;
		else if (g.ents[m].lo > pc)
			hi = m;
		else
			return g.ents[m].kind;
	}
	return H_NONE;
}

/* [@pc, @pc+@len) holds @bytes from here on, in the trace's order: a CODE
 * record unless the trace says so already.  The flow so far ran the old
 * bytes: it goes out first. */
static void code_put(uint64_t pc, const uint8_t *bytes, size_t len)
{
	if (!len || !g.told || codepages_same(g.told, pc, bytes, len) || codepages_put(g.told, pc, bytes, len) < 0)
		return;
	pt_flush();
	struct btr_record r = { .type = BTR_REC_CODE };
	r.u.code.pid = PID;
	r.u.code.addr = pc;
	r.u.code.hash = codeblobs_hash(bytes, len);
	r.u.code.size = (uint32_t)len;
	r.u.code.data = bytes;
	write_rec(&r);
	g.n_code++;
	if (pc < KERNEL_HALF)
		g.code_gen++;
}

/* TB @b translated: its bytes. */
static void code_seen(struct qemu_plugin_tb *tb, size_t n, struct tb *b)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);
		size_t k = qemu_plugin_insn_size(in);
		if (qemu_plugin_insn_vaddr(in) != b->pc + len || len + k > sizeof(g.code))
			break;
		memcpy(g.code + len, qemu_plugin_insn_data(in), k);
		len += k;
	}
	/* Processes share user addresses: a TB QEMU still holds for one
	 * process may run after another's code at the same address was
	 * written (tb_exec checks it against the trace again). */
	if (b->pc < KERNEL_HALF && (b->bytes = malloc(len ? len : 1))) {
		memcpy(b->bytes, g.code, len);
		b->len = (uint32_t)len;
	}
	if (!g.started && b->pc < KERNEL_HALF)
		return;   /* the firmware, setup, the decompressor (or kernel code run at its physical address) */
	code_put(b->pc, g.code, len);
	b->gen = g.code_gen;
	b->ran_at = b->pc;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	if (!n)
		return;
	struct tb *b = calloc(1, sizeof(*b));
	if (!b)
		return;
	b->pc = qemu_plugin_tb_vaddr(tb);
	b->handler = handler_at(b->pc);
	qemu_plugin_u64 slot = { g.sb, 0 };
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);
		uint64_t va = qemu_plugin_insn_vaddr(in);
		const uint8_t *bytes = qemu_plugin_insn_data(in);
		size_t len = qemu_plugin_insn_size(in);
		struct btr_insn ins;
		int ok = btr_insn_decode(bytes, len, va, BTR_MODE_64, &ins) > 0;
		qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(in, QEMU_PLUGIN_INLINE_STORE_U64, slot, va);
		if (ok && (ins.flags & BTR_INSN_MOV_CR3))
			b->flags |= F_CR3;
		if (i == n - 1) {
			b->last_pc = va;
			b->end = b->target = va + len;
			if (ok) {
				b->kind = ins.kind;
				if (ins.kind != BTR_KIND_NONE && (ins.flags & BTR_INSN_DIRECT))
					b->target = ins.target;
				if (ins.flags & BTR_INSN_FAR)
					b->flags |= F_FAR;
				if (len >= 2 && (bytes[0] == 0xf3 || bytes[0] == 0xf2) && ins.kind == BTR_KIND_NONE)
					b->flags |= F_REP;
			}
		}
	}
	qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_R_REGS, b);
	code_seen(tb, n, b);
}

/* ---- System.map ---- */

static int err_code_entry(const char *name)
{
	static const char *const with[] = { "asm_exc_page_fault", "asm_exc_general_protection",
		"asm_exc_double_fault", "asm_exc_invalid_tss", "asm_exc_segment_not_present",
		"asm_exc_stack_segment", "asm_exc_alignment_check", "asm_exc_control_protection", NULL };
	for (int i = 0; with[i]; i++)
		if (!strcmp(name, with[i]))
			return 1;
	return 0;
}

static void read_sysmap(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512], name[400];
	size_t cap = 0;
	uint64_t irq_lo = 0, irq_hi = 0, spur_lo = 0, early_lo = 0;
	struct { uint64_t a; char *name; } *syms = NULL;
	size_t n_syms = 0, cap_syms = 0;
	while (fgets(line, sizeof(line), f)) {
		uint64_t a;
		char t;
		if (sscanf(line, "%" SCNx64 " %c %399s", &a, &t, name) != 3)
			continue;
		if (t != 't' && t != 'T')
			continue;
		if (!strcmp(name, "irq_entries_start"))
			irq_lo = a;
		else if (!strcmp(name, "spurious_entries_start"))
			irq_hi = spur_lo = a;
		else if (!strcmp(name, "early_idt_handler_array"))
			early_lo = a;
		/* IDT targets only: asm_common_interrupt and
		 * asm_spurious_interrupt are jumped to by the stubs below
		 * (after they pushed the vector). */
		int kind = !strncmp(name, "asm_exc_", 8) || !strncmp(name, "asm_sysvec_", 11);
		if (kind) {
			if (g.n_ents == cap) {
				cap = cap ? 2 * cap : 256;
				g.ents = realloc(g.ents, cap * sizeof(*g.ents));
			}
			g.ents[g.n_ents++] = (struct ent){ a, a + 1, err_code_entry(name) ? H_ENTRY_ERR : H_ENTRY };
		}
		if (n_syms == cap_syms) {
			cap_syms = cap_syms ? 2 * cap_syms : 4096;
			syms = realloc(syms, cap_syms * sizeof(*syms));
		}
		syms[n_syms].a = a;
		syms[n_syms++].name = strdup(name);
	}
	fclose(f);
	/* Every external interrupt's stub (irq_entries_start: one per vector,
	 * 8 or 16 bytes each; the spurious ones after) and the early IDT's
	 * handlers (the kernel's first page-table faults), each up to the
	 * next symbol. */
	uint64_t starts[3] = { irq_lo, spur_lo, early_lo };
	for (int k = 0; k < 3; k++) {
		if (!starts[k])
			continue;
		uint64_t hi = 0;
		for (size_t i = 0; i < n_syms && !hi; i++)
			if (syms[i].a > starts[k])
				hi = syms[i].a;
		if (k == 0 && irq_hi > irq_lo)
			hi = irq_hi;
		if (!hi)
			continue;
		if (g.n_ents == cap)
			g.ents = realloc(g.ents, (cap = 2 * cap + 4) * sizeof(*g.ents));
		g.ents[g.n_ents++] = (struct ent){ starts[k], hi, k == 2 ? H_ENTRY_ANY : H_ENTRY };
	}
	qsort(g.ents, g.n_ents, sizeof(*g.ents), ent_cmp);
	/* System.map is sorted: each symbol's size is up to the next. */
	for (size_t i = 0; i < n_syms; i++) {
		uint64_t size = i + 1 < n_syms && syms[i + 1].a > syms[i].a ? syms[i + 1].a - syms[i].a : 16;
		struct btr_record r = { .type = BTR_REC_SYMBOL };
		r.u.sym.pid = PID;
		r.u.sym.source = BTR_SYM_PERF_MAP;
		r.u.sym.addr = syms[i].a;
		r.u.sym.size = size;
		r.u.sym.name = syms[i].name;
		if (i + 1 == n_syms || syms[i + 1].a != syms[i].a)
			write_rec(&r);
		free(syms[i].name);
	}
	free(syms);
}

/* ---- setup ---- */

static void vcpu_init(qemu_plugin_id_t id, unsigned vcpu)
{
	(void)id;
	if (vcpu != 0)
		return;
	btr_garray *regs = qemu_plugin_get_registers();
	qemu_plugin_reg_descriptor *d = (qemu_plugin_reg_descriptor *)regs->data;
	for (unsigned i = 0; i < regs->len; i++) {
		if (!strcmp(d[i].name, "cr3"))
			g.r_cr3 = d[i].handle;
		else if (!strcmp(d[i].name, "cs"))
			g.r_cs = d[i].handle;
		else if (!strcmp(d[i].name, "rsp"))
			g.r_rsp = d[i].handle;
		else if (!strcmp(d[i].name, "rip"))
			g.r_rip = d[i].handle;
	}
	g_array_free(regs, 1);
}

static void at_exit(qemu_plugin_id_t id, void *ud)
{
	(void)id;
	(void)ud;
	if (g.enabled && g.prev) {
		/* Powered off: the flow stops after the last TB (the power-off
		 * port write, which completed). */
		ip_pkt(BTR_PT_FUP, g.prev->end + g.prev_delta);
		pkt(BTR_PT_TIP_PGD);
	}
	pt_flush();
	struct btr_record r = { .type = BTR_REC_THREAD_EXIT };
	r.u.thread.pid = PID;
	r.u.thread.tid = TID;
	r.u.thread.end = BTR_THREAD_END_EXITED;
	write_rec(&r);
	r = (struct btr_record){ .type = BTR_REC_PROCESS_EXIT };
	r.u.exit.pid = PID;
	r.u.exit.tid = TID;
	write_rec(&r);
	if (g.w && btr_trace_writer_close(g.w) < 0 && !g.err)
		g.err = -BTR_ERR_IO;
	g.w = NULL;
	char msg[256];
	snprintf(msg, sizeof(msg), "btr-qemu-system: %" PRIu64 " TBs, %" PRIu64 " events, %" PRIu64
		 " code records, %" PRIu64 " PT bytes%s\n", g.n_tb, g.n_events, g.n_code, g.flushed,
		 g.err ? ", WRITE ERROR" : "");
	if (getenv("BTR_QEMU_SYSTEM_STATS"))
		qemu_plugin_outs(msg);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	const char *out = NULL, *sysmap = NULL, *cmd = "";
	if (!info->system_emulation || strcmp(info->target_name, "x86_64")) {
		qemu_plugin_outs("btr-qemu-system: needs qemu-system-x86_64\n");
		return -1;
	}
	if (info->system.smp_vcpus != 1) {
		qemu_plugin_outs("btr-qemu-system: records one vCPU (-smp 1)\n");
		return -1;
	}
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
		else if (!strncmp(argv[i], "sysmap=", 7))
			sysmap = argv[i] + 7;
		else if (!strncmp(argv[i], "cmd=", 4))
			cmd = argv[i] + 4;
		else if (!strcmp(argv[i], "filter=user"))
			g.filter = 1;
		else if (!strcmp(argv[i], "filter=kernel"))
			g.filter = 2;
		else if (strcmp(argv[i], "filter=all")) {
			qemu_plugin_outs("btr-qemu-system: unknown argument\n");
			return -1;
		}
	}
	if (!out) {
		qemu_plugin_outs("btr-qemu-system: out=FILE missing\n");
		return -1;
	}
	struct btr_trace_writer_opts o = { .sz = sizeof(o), .compress = 1, .no_sync = 1 };
	if (btr_trace_writer_new(out, &o, &g.w) < 0) {
		qemu_plugin_outs("btr-qemu-system: cannot create the trace\n");
		return -1;
	}
	g.rb = g_byte_array_new();
	g.sb = qemu_plugin_scoreboard_new(sizeof(uint64_t));
	codepages_new(&g.told);
	btr_pt_enc_init(&g.enc, g.buf, sizeof(g.buf));
	btr_pt_tnt_init(&g.tnt, 0);

	struct btr_record r = { .type = BTR_REC_MACHINE };
	snprintf(r.u.machine.backend, sizeof(r.u.machine.backend), "qemu-system");
	r.u.machine.flags = g.filter == 1 ? BTR_MACHINE_USER_ONLY : g.filter == 2 ? BTR_MACHINE_KERNEL_ONLY : 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	r.u.machine.start_time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	write_rec(&r);
	r = (struct btr_record){ .type = BTR_REC_PROCESS };
	r.u.process.pid = PID;
	r.u.process.event = BTR_PROC_START;
	r.u.process.path = cmd;
	r.u.process.args = "";
	r.u.process.detail = "";
	write_rec(&r);
	r = (struct btr_record){ .type = BTR_REC_THREAD_START };
	r.u.thread.pid = PID;
	r.u.thread.tid = TID;
	write_rec(&r);
	if (sysmap)
		read_sysmap(sysmap);

	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
