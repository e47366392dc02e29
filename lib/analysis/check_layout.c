/* check_layout.c - what `btr check` reads off the code itself where the
 * model of an ELF file (check_model.c) knows no entry: functions of
 * hand-written assembly without CFI that start by their layout, and labels
 * a function takes the address of (gcc's __builtin_setjmp receivers).
 * check.c calls in; nothing here calls back into the judging. */
#include "btr/image.h"
#include "btr/insn.h"
#include "check_priv.h"

#include <stdlib.h>
#include <string.h>

/* Alignment padding between functions: NOP (90, 66 90), the long NOPs
 * (0F 1F /0, with 66 and 2E prefixes) and INT3. */
static int is_padding(const uint8_t *p, int len)
{
	int i = 0;
	while (i < len - 1 && (p[i] == 0x66 || p[i] == 0x2e))
		i++;
	return (p[i] == 0x90 && i == len - 1) || p[i] == 0xcc ||
	       (i + 1 < len && p[i] == 0x0f && p[i + 1] == 0x1f);
}

/* Nonzero if link address @tl of module @cm (mapping @m) lies in code no
 * FDE range covers and starts a function by its layout.  Hand-written
 * assembly often has no CFI, and in a stripped file no symbol either
 * (zstd's Huffman decoder loops, called through a function pointer): the
 * model knows no entry there.  Such code begins at a known boundary (the
 * end of the nearest FDE range below it, or the nearest entry) and is
 * laid out one function after the other, so a function starts at that
 * boundary and right after each unconditional transfer (ret, jmp, ud2,
 * hlt), alignment padding skipped.  Decided by a linear sweep from the
 * boundary (at most SPLIT_SCAN bytes), cached per address. */
int check_starts_by_layout(struct check *c, uint32_t pid, const struct mapping *m, const struct check_mod *cm,
			   uint64_t tl)
{
	uint64_t lo;
	if (!check_mod_fde_gap(cm, tl, &lo))
		return 0;
	uint64_t f = check_mod_func_of(cm, tl);
	if (f != UINT64_MAX && (lo == UINT64_MAX || f > lo))
		lo = f;
	if (lo == UINT64_MAX || lo > tl || tl - lo > SPLIT_SCAN)
		return 0;
	uint32_t v;
	uint64_t key = (uint64_t)m->mod << 48 | tl;
	if (pairmap_get(&c->layout, key, 0, &v))
		return (int)v;
	size_t n = (size_t)(tl - lo);
	uint8_t *buf = malloc(n + 16);
	int got = buf ? btr_image_read(btr_stream_image_pid(c->s, pid), lo + m->bias, buf, n + 16) : -1;
	int starts = 1;   /* at the boundary */
	size_t o = 0;
	while (got > 0 && o < n) {
		struct btr_insn in;
		int l = btr_insn_decode(buf + o, (size_t)got - o, lo + o, BTR_MODE_64, &in);
		if (l <= 0)
			break;
		if (!is_padding(buf + o, l))
			starts = in.kind == BTR_KIND_RET || in.kind == BTR_KIND_JMP || in.kind == BTR_KIND_JMP_IND ||
				 in.kind == BTR_KIND_FAR_JMP || in.kind == BTR_KIND_FAR_RET || (in.flags & BTR_INSN_STOPS);
		o += (size_t)l;
	}
	free(buf);
	v = got > 0 && o == n && starts;   /* the sweep lands on @tl */
	if (pairmap_put(&c->layout, key, 0, v) < 0)
		return 0;
	return (int)v;
}

/* Nonzero if link address @tl of module @cm (mapping @m) is a label its
 * own function takes the address of with `lea tl(%rip), reg`: the
 * receiver of gcc's __builtin_setjmp, which __builtin_longjmp enters with
 * an indirect jump (Ruby's VM: EC_JUMP_TAG to rb_vm_exec), or a computed
 * goto's label in position-independent code.  The function is the FDE
 * range holding @tl (at most SPLIT_SCAN bytes of it, from its start);
 * cached per address. */
int check_lea_taken(struct check *c, uint32_t pid, const struct mapping *m, const struct check_mod *cm, uint64_t tl)
{
	uint64_t lo, hi;
	if (!check_mod_fde_of(cm, tl, &lo, &hi))
		return 0;
	uint32_t v;
	uint64_t key = (uint64_t)m->mod << 48 | tl;
	if (pairmap_get(&c->layout, key, 1, &v))
		return (int)v;
	size_t n = (size_t)(hi - lo > SPLIT_SCAN ? SPLIT_SCAN : hi - lo);
	uint8_t *buf = malloc(n);
	int got = buf ? btr_image_read(btr_stream_image_pid(c->s, pid), lo + m->bias, buf, n) : -1;
	v = 0;
	for (size_t o = 0; got > 0 && o < (size_t)got && !v;) {
		struct btr_insn in;
		int l = btr_insn_decode(buf + o, (size_t)got - o, lo + o, BTR_MODE_64, &in);
		if (l <= 0) {
			o++;
			continue;
		}
		/* [REX.W] 8D /r with mod 00, r/m 101: lea disp32(%rip) */
		size_t i = o + ((buf[o] & 0xf0) == 0x40);
		if (l >= 6 && i + 6 <= o + (size_t)l && buf[i] == 0x8d && (buf[i + 1] & 0xc7) == 0x05 &&
		    i + 6 == o + (size_t)l) {
			int32_t disp;
			memcpy(&disp, buf + i + 2, 4);
			v = lo + o + (uint64_t)l + (uint64_t)(int64_t)disp == tl;
		}
		o += (size_t)l;
	}
	free(buf);
	if (pairmap_put(&c->layout, key, 1, v) < 0)
		return 0;
	return (int)v;
}
