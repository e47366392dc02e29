/* qemu_pt.c - a thread's PT stream leaves the encoder: pt_flush writes
 * it as a PT record (or, under --snapshot, into the thread's ring,
 * qemu_snapshot.c), emit_psb writes a PSB+.
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

void pt_flush(struct thr *t)
{
	if (t->snap) {
		snap_flush(t);   /* --snapshot: into the thread's ring */
		return;
	}
	qs_pend_resolve(t, 0, 0);    /* the hole must be filled before it leaves */
	size_t n = btr_pt_enc_size(&t->enc);
	if (!n)
		return;
	struct btr_record r = { .type = BTR_REC_PT };
	r.u.data.tid = t->tid;
	r.u.data.cpu = -1;
	r.u.data.stream_offset = t->flushed;
	r.u.data.size = n;
	r.u.data.data = t->enc.begin;
	write_rec(&r);
	t->flushed += n;
	t->enc.pos = t->enc.begin;   /* keeps last_ip: the stream continues */
}

void emit_mode(struct thr *t)
{
	struct btr_pt_packet p = { .type = BTR_PT_MODE_EXEC };
	p.u.mode_exec.csl = 1;
	btr_pt_enc_packet(&t->enc, &p);
}

/* PSB+: PSB, MODE.Exec, FUP (current IP, only while PacketEn), PSBEND. */
void emit_psb(struct thr *t, uint64_t ip, int with_fup)
{
	tnt_flush(t);
	struct btr_pt_packet p = { .type = BTR_PT_PSB };
	t->last_psb = stream_pos(t);
	snap_psb(t);
	btr_pt_enc_packet(&t->enc, &p);
	t->enc.last_ip = 0;           /* the decoder resets its last IP at PSB */
	emit_mode(t);
	if (with_fup)
		btr_pt_enc_ip(&t->enc, BTR_PT_FUP, ip);
	p.type = BTR_PT_PSBEND;
	btr_pt_enc_packet(&t->enc, &p);
	t->rs_n = 0;                  /* no RET compression across a PSB */
	update_check(t);
}
