/* check_got.c - `btr check`'s rules for transfers through GOT slots:
 * PLT stubs' jumps and the `call/jmp *slot(%rip)` of -fno-plt code
 * (got-overwrite, interposition).  check.c calls in (check_indirect);
 * nothing here calls back.
 *
 * The slot is read from the instruction (its RIP-relative operand) and
 * looked up in the module's relocations (check_model.c), so the name of
 * the function it imports comes from the file, never from a buffer of
 * some size: names of any length are judged alike.  What may legitimately
 * be in a slot is what the dynamic linker puts there:
 *  - JUMP_SLOT, GLOB_DAT of NAME: NAME as some module exports it (the
 *    module the transfer reaches must export NAME);
 *  - IRELATIVE: what the IFUNC resolver (the addend) returns, a function
 *    of the same module: one of the addresses the resolver's code takes
 *    (glibc's libm calls its own log1p through such a slot, which its
 *    resolver fills with __log1p_fma or __log1p_sse2; docs/check.md).
 */
#include "btr/check.h"
#include "btr/image.h"
#include "btr/stream.h"
#include "check_priv.h"
#include "internal.h"

#include <inttypes.h>
#include <string.h>

/* The GOT slot (run-time address) that the `call/jmp *disp32(%rip)` at
 * @b->from (FF /2, FF /4 with a RIP-relative ModRM, optional prefixes)
 * goes through, or 0 if the instruction there is none. */
static uint64_t got_slot_of(struct check *c, const struct btr_branch *b)
{
	uint8_t buf[16];
	int n = btr_image_read(btr_stream_image_pid(c->s, b->pid), b->from, buf, sizeof(buf));
	int i = 0;
	while (i < n && i < 4 && (buf[i] == 0x3e || buf[i] == 0xf2 || buf[i] == 0x2e || (buf[i] & 0xf0) == 0x40))
		i++;
	if (i + 6 > n || buf[i] != 0xff || (buf[i + 1] != 0x15 && buf[i + 1] != 0x25))
		return 0;
	int32_t disp;
	memcpy(&disp, buf + i + 2, 4);
	return b->from + (uint64_t)(i + 6) + (uint64_t)(int64_t)disp;
}

/* Where @name would come from without preloading: breadth-first over
 * DT_NEEDED from the program, then from the calling module (a dlopen'ed
 * one).  NULL if no module of that chain exports it. */
static const struct check_mod *expected_provider(struct check *c, struct proc *p, const struct mapping *fmap,
						 const char *name)
{
	int order[256];
	size_t n = 0;
	for (size_t i = 0; i < p->n_maps && n < 1; i++)
		if (check_mod_of(c, &p->maps[i]) && c->mods[p->maps[i].mod].is_main)
			order[n++] = p->maps[i].mod;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			int seen_f = 0;
			for (size_t i = 0; i < n; i++)
				seen_f |= order[i] == fmap->mod;
			if (seen_f)
				break;
			order[n++] = fmap->mod;
		}
		for (size_t i = 0; i < n && n < BTR_ARRAY_SIZE(order); i++) {
			const struct check_mod *m = &c->mods[order[i]];
			for (size_t k = 0; k < m->n_needed; k++) {
				for (size_t j = 0; j < p->n_maps; j++) {
					int mi = p->maps[j].mod;
					if (mi < 0 || !c->mods[mi].ok)
						continue;
					const struct check_mod *cand = &c->mods[mi];
					if (strcmp(m->needed[k], cand->soname ? cand->soname : check_base_name(cand->path)))
						continue;
					int dup = 0;
					for (size_t q = 0; q < n; q++)
						dup |= order[q] == mi;
					if (!dup && n < BTR_ARRAY_SIZE(order))
						order[n++] = mi;
					break;
				}
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		if (check_mod_exports(&c->mods[order[i]], name))
			return &c->mods[order[i]];
	return NULL;
}

int check_got_transfer(struct check *c, struct proc *p, struct thr *t, const struct btr_branch *b,
		       const struct mapping *fmap, const struct check_mod *fm)
{
	uint64_t slot = got_slot_of(c, b), resolver = 0;
	const char *name = NULL;
	if (!slot || !check_mod_got(fm, slot - fmap->bias, &name, &resolver))
		return 0;
	int plt = check_mod_in_plt(fm, b->from - fmap->bias);
	const char *how = plt ? "PLT jump" : "call through it";
	if (check_mod_in_plt(fm, b->to - fmap->bias))
		return 1;   /* lazy binding: on to the stub's push */
	struct mapping *tmap = check_map_of(p, b->to);
	const struct check_mod *tm = check_mod_of(c, tmap);
	if (!tm)
		return 1;   /* no model (or no file: reported as unbacked) */
	/* A non-PIE program's PLT stub is the canonical address of a function
	 * whose address it takes: other modules' slots point there, and that
	 * stub's own jump is checked next. */
	if (check_mod_in_plt(tm, b->to - tmap->bias))
		return 1;
	if ((tm->soname && !strncmp(tm->soname, "ld-linux", 8)) || !strncmp(check_base_name(tm->path), "ld-linux", 8))
		return 1;   /* the lazy-binding resolver */
	uint64_t tsc = (b->flags & BTR_BF_TSC) ? b->tsc : 0;
	if (!name) {
		/* IRELATIVE: the dynamic linker stored what the resolver
		 * returned, a function of this module the resolver's code takes */
		if (tmap->mod == fmap->mod && check_mod_ifunc_target(fm, resolver, b->to - tmap->bias))
			return 1;
		char rsym[SYM_LEN], tsym[SYM_LEN];
		check_symbolize(c, b->pid, resolver + fmap->bias, rsym);
		check_symbolize(c, b->pid, b->to, tsym);
		int rc = check_add_finding(c, K_GOT, BTR_CHECK_HIGH, t, b->from, b->to, b->to, c->pos, tsc,
					   "the IRELATIVE GOT slot at 0x%" PRIx64 " in %s sends the %s to %s in %s, "
					   "which its IFUNC resolver %s does not return (overwritten GOT entry)",
					   slot, fm->path, how, tsym, tm->path, rsym);
		return rc < 0 ? rc : 1;
	}
	if (!check_mod_exports(tm, name)) {
		char tsym[SYM_LEN];
		check_symbolize(c, b->pid, b->to, tsym);
		int rc = check_add_finding(c, K_GOT, BTR_CHECK_HIGH, t, b->from, b->to, b->to, c->pos, tsc,
					   "the GOT slot of %s in %s sends the %s to %s in %s, which does not "
					   "export %s (overwritten GOT entry)",
					   name, fm->path, how, tsym, tm->path, name);
		return rc < 0 ? rc : 1;
	}
	const struct check_mod *expect = expected_provider(c, p, fmap, name);
	if (!expect || expect == tm)
		return 1;
	int rc = check_add_finding(c, K_INTERPOSE, BTR_CHECK_MEDIUM, t, b->from, b->to, b->to, c->pos, tsc,
				   "%s called from %s resolves to %s, which no DT_NEEDED chain of the program loads "
				   "(preloaded); without it %s would provide %s",
				   name, fm->path, tm->path, expect->path, name);
	return rc < 0 ? rc : 1;
}
