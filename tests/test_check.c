/* test_check.c - the check analysis on sampled LBR data (kBouncer-style
 * checks, no full flow): a .btr with the module map of prog_check_smash
 * and LBR snapshots built from that binary's real code.  A legitimate
 * call/return pair gives nothing; a return into win() (no call precedes
 * it) is a return-hijack; three returns in a row into non-call-preceded
 * addresses a rop-chain; a direct call recorded to a target its encoding
 * does not name is code-modified.  Split functions (prog_benign_cold_o2,
 * gcc -O2): f's switch jump into f.cold is legitimate, the same jump into
 * the middle of main stays jump-non-entry.  The fast path (transfers
 * judged clean before are not judged again) hides nothing a site gives
 * later: decoded branch records (full flow) repeat clean transfers, then
 * plant a finding at the same site.  The qemu recordings of the fixtures
 * are tested in tests/cli_check.sh. */
#include "check.h"
#include "analysis/check_priv.h"
#include "btr/btr.h"
#include "btr/check.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define PROG BTR_BINARY_DIR "/prog_check_smash"
#define BIAS 0x555555554000ull

static uint64_t sym_range(const char *path, const char *want, uint64_t *size);

static uint64_t sym_addr(const char *path, const char *want)
{
	uint64_t size;
	return sym_range(path, want, &size);
}

/* Address and size of the symbol @want of @path (0 if none). */
static uint64_t sym_range(const char *path, const char *want, uint64_t *size)
{
	*size = 0;
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	uint64_t v = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while (e && !v && (scn = elf_nextscn(e, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;
			if (gelf_getsym(d, (int)i, &s) && (n = elf_strptr(e, sh.sh_link, s.st_name)) &&
			    !strcmp(n, want)) {
				v = s.st_value;
				*size = s.st_size;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return v;
}

/* First instruction of kind @kind (and direct target @target if nonzero)
 * in [@lo, @lo + 512); stores its length. */
static uint64_t find_insn(struct btr_image *img, uint64_t lo, int kind, uint64_t target, int *len)
{
	for (uint64_t a = lo; a < lo + 512;) {
		struct btr_insn in;
		int n = btr_insn_decode_image(img, a, BTR_MODE_64, &in);
		if (n <= 0)
			return 0;
		if (in.kind == kind && (!target || in.target == target)) {
			*len = n;
			return a;
		}
		a += (uint64_t)n;
	}
	return 0;
}

static void write_lbr(struct btr_trace_writer *w, const struct btr_lbr_entry *e, uint32_t n);

/* [*@lo, *@hi) of section @name of @path from its header; 0 if none. */
static int scn_range(const char *path, const char *name, uint64_t *lo, uint64_t *hi)
{
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstr;
	int found = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while (e && !found && elf_getshdrstrndx(e, &shstr) == 0 && (scn = elf_nextscn(e, scn)) != NULL) {
		const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstr, sh.sh_name) : NULL;
		if (n && !strcmp(n, name) && sh.sh_size) {
			*lo = sh.sh_addr;
			*hi = sh.sh_addr + sh.sh_size;
			found = 1;
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return found;
}

/* The model of prog_check_smash against its own headers: gcc's FDE of
 * a function spans exactly its symbol (st_value, st_size), the byte
 * after it belongs to no FDE or the next function's; every PLT section
 * (.plt, .plt.got here: __cxa_finalize) is PLT code to its last byte. */
static void model(void)
{
	struct check_mod m;
	memset(&m, 0, sizeof(m));
	CHECK_EQ(check_mod_load(PROG, &m), 0);
	static const char *const fns[] = { "win", "vuln", "main" };
	for (size_t i = 0; i < N_OF(fns); i++) {
		uint64_t size, start = sym_range(PROG, fns[i], &size), lo = 0, hi = 0;
		CHECK(start && size);
		CHECK(check_mod_fde_of(&m, start, &lo, &hi) && lo == start && hi == start + size);
		CHECK(check_mod_fde_of(&m, start + size - 1, &lo, &hi) && lo == start && hi == start + size);
		lo = hi = 0;
		CHECK(!check_mod_fde_of(&m, start + size, &lo, &hi) || lo == start + size);
	}
	static const char *const plts[] = { ".plt", ".plt.sec", ".plt.got" };
	int n = 0;
	for (size_t i = 0; i < N_OF(plts); i++) {
		uint64_t lo, hi;
		if (!scn_range(PROG, plts[i], &lo, &hi))
			continue;
		n++;
		CHECK(check_mod_in_plt(&m, lo) && check_mod_in_plt(&m, hi - 1));
	}
	CHECK(n >= 2);
	CHECK(!check_mod_in_plt(&m, sym_addr(PROG, "main")));
	check_mod_free(&m);
}

/* A .btr with the LBR machine record, @prog's text mapped at BIAS and
 * thread 77. */
static struct btr_trace_writer *lbr_trace(const char *path, const char *prog)
{
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .no_sync = 1 };
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(path, &wo, &w), 0);
	struct btr_record r = { .type = BTR_REC_MACHINE };
	snprintf(r.u.machine.backend, sizeof(r.u.machine.backend), "lbr");
	r.u.machine.lbr_depth = 16;
	CHECK_EQ(btr_trace_write(w, &r), 0);
	memset(&r, 0, sizeof(r));
	r.type = BTR_REC_MODULE_LOAD;
	r.u.module.pid = 77;
	r.u.module.prot = 5;
	r.u.module.start = BIAS + 0x1000;
	r.u.module.size = 0x1000;
	r.u.module.pgoff = 0x1000;
	r.u.module.path = prog;
	CHECK_EQ(btr_trace_write(w, &r), 0);
	memset(&r, 0, sizeof(r));
	r.type = BTR_REC_THREAD_START;
	r.u.thread.pid = r.u.thread.tid = 77;
	r.u.thread.name = "";
	CHECK_EQ(btr_trace_write(w, &r), 0);
	return w;
}

/* prog_benign_cold_o2: f's table jump into f.cold is one function's
 * jump; into main's middle it is jump-non-entry. */
/* Runs check (with @co) over @path into *@a (the caller frees it) and
 * prints its findings, each line after @tag; returns them (*@n). */
static const struct btr_check_finding *run_check(const char *path, const struct btr_check_opts *co,
						  const char *tag, struct btr_analysis **a, size_t *n)
{
	*n = 0;
	CHECK_EQ(btr_check_new(co, a), 0);
	CHECK_EQ(btr_analysis_run(path, NULL, a, 1, NULL), 0);
	const struct btr_check_finding *f = btr_check_findings(*a, n);
	for (size_t i = 0; i < *n; i++)
		printf("%s%s %s 0x%llx -> 0x%llx %s\n", tag, btr_check_severity_name(f[i].severity), f[i].kind,
		       (unsigned long long)f[i].from, (unsigned long long)f[i].to, f[i].detail);
	return f;
}

static void split_functions(void)
{
	const char *prog = BTR_BINARY_DIR "/prog_benign_cold_o2";
	uint64_t f = sym_addr(prog, "f"), fc = sym_addr(prog, "f.cold"), mainf = sym_addr(prog, "main");
	if (!f || !fc || !mainf || f >= 0x2000 || fc >= 0x2000 || mainf >= 0x2000) {
		printf("note: prog_benign_cold_o2 has no f.cold in its first text page (compiler?): skipped\n");
		return;
	}
	/* the model: f.cold is part of f by name; each has its FDE */
	struct check_mod m = {0};
	CHECK_EQ(check_mod_load(prog, &m), 0);
	CHECK_EQ(check_mod_group_of(&m, fc + 2), f);
	CHECK_EQ(check_mod_group_of(&m, f + 2), f);
	CHECK_EQ(check_mod_group_of(&m, mainf + 2), mainf);
	uint64_t lo = 0, hi = 0;
	CHECK(check_mod_fde_of(&m, fc + 2, &lo, &hi) && lo == fc && hi > fc + 2);
	CHECK(check_mod_fde_of(&m, f + 2, &lo, &hi) && lo == f);
	check_mod_free(&m);

	struct btr_image *img;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, prog, BIAS, 0), 0);
	int len = 0, jlen = 0, mlen = 0;
	uint64_t jmp = find_insn(img, f + BIAS, BTR_KIND_JMP_IND, 0, &len);
	/* a case label in f.cold: what follows its first jump back into f */
	uint64_t back = find_insn(img, fc + BIAS, BTR_KIND_JMP, 0, &jlen);
	struct btr_insn in;
	mlen = btr_insn_decode_image(img, mainf + BIAS, BTR_MODE_64, &in);
	btr_image_free(img);
	CHECK(jmp && back && mlen > 0);
	uint64_t label = back + (uint64_t)jlen, mid_main = mainf + BIAS + (uint64_t)mlen;

	char path[128];
	snprintf(path, sizeof(path), "/tmp/btr_test_check_split_%d.btr", (int)getpid());
	struct btr_trace_writer *w = lbr_trace(path, prog);
	struct btr_lbr_entry into_cold[1] = { { jmp, label, 0, 0 } };
	write_lbr(w, into_cold, 1);
	struct btr_lbr_entry into_main[1] = { { jmp, mid_main, 0, 0 } };
	write_lbr(w, into_main, 1);
	CHECK_EQ(btr_trace_writer_close(w), 0);
	struct btr_analysis *a;
	struct btr_check_opts co = { .sz = sizeof(co) };
	size_t n;
	const struct btr_check_finding *fd = run_check(path, &co, "", &a, &n);
	CHECK_EQ(n, 1);
	CHECK(n == 1 && !strcmp(fd[0].kind, "jump-non-entry") && fd[0].to == mid_main);
	btr_analysis_free(a);
	unlink(path);
}

static void write_lbr(struct btr_trace_writer *w, const struct btr_lbr_entry *e, uint32_t n)
{
	struct btr_record r = { .type = BTR_REC_LBR };
	r.u.lbr.pid = r.u.lbr.tid = 77;
	r.u.lbr.count = n;
	r.u.lbr.entries = e;
	CHECK_EQ(btr_trace_write(w, &r), 0);
}

static void write_branches(struct btr_trace_writer *w, const struct btr_branch *b, uint32_t n)
{
	struct btr_record r = { .type = BTR_REC_BRANCHES };
	r.u.branches.tid = 77;
	r.u.branches.count = n;
	r.u.branches.branches = b;
	CHECK_EQ(btr_trace_write(w, &r), 0);
}

/* Each case repeats a clean transfer from one site (so the fast path has
 * it), then records what must still be reported from that site:
 * - the conditional jump of main recorded as a direct jmp to the same
 *   target (code-modified: the record's kind is not the code's);
 * - vuln's return to main after the call (clean twice), then the same
 *   return while the top frame is another call's (return-mismatch). */
static void fast_path(void)
{
	struct btr_image *img;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, PROG, BIAS, 0), 0);
	uint64_t vuln = sym_addr(PROG, "vuln"), mainf = sym_addr(PROG, "main");
	int jl = 0, cl = 0, c2l = 0, rl = 0;
	uint64_t jcc = find_insn(img, mainf + BIAS, BTR_KIND_JCC, 0, &jl);
	uint64_t call = find_insn(img, mainf + BIAS, BTR_KIND_CALL, vuln + BIAS, &cl);
	uint64_t call2 = find_insn(img, vuln + BIAS, BTR_KIND_CALL, 0, &c2l);
	uint64_t ret = find_insn(img, vuln + BIAS, BTR_KIND_RET, 0, &rl);
	struct btr_insn jin = { 0 }, c2in = { 0 };
	CHECK(btr_insn_decode_image(img, jcc, BTR_MODE_64, &jin) > 0);
	CHECK(btr_insn_decode_image(img, call2, BTR_MODE_64, &c2in) > 0);
	btr_image_free(img);
	CHECK(jcc && call && call2 && ret && jin.target && c2in.target);
	uint64_t after = call + (uint64_t)cl;

	char path[128];
	snprintf(path, sizeof(path), "/tmp/btr_test_check_fast_%d.btr", (int)getpid());
	struct btr_trace_writer *w = lbr_trace(path, PROG);
	const uint16_t T = BTR_BF_TAKEN;
#define BR(f, t, k) { .from = (f), .to = (t), .tid = 77, .flags = T, .kind = (k) }
	struct btr_branch kind_case[] = {
		BR(jcc, jin.target, BTR_KIND_JCC), BR(jcc, jin.target, BTR_KIND_JCC), BR(jcc, jin.target, BTR_KIND_JCC),
		BR(jcc, jin.target, BTR_KIND_JMP),
	};
	write_branches(w, kind_case, N_OF(kind_case));
	struct btr_branch ret_case[] = {
		BR(call, vuln + BIAS, BTR_KIND_CALL), BR(ret, after, BTR_KIND_RET),
		BR(call, vuln + BIAS, BTR_KIND_CALL), BR(ret, after, BTR_KIND_RET),
		BR(call, vuln + BIAS, BTR_KIND_CALL), BR(ret, after, BTR_KIND_RET),
		BR(call2, c2in.target, BTR_KIND_CALL), BR(ret, after, BTR_KIND_RET),
		BR(jcc, jin.target, BTR_KIND_JCC),   /* ends the run of suspicious returns */
	};
	write_branches(w, ret_case, N_OF(ret_case));
#undef BR
	CHECK_EQ(btr_trace_writer_close(w), 0);

	struct btr_analysis *a;
	struct btr_check_opts co = { .sz = sizeof(co) };
	size_t n;
	const struct btr_check_finding *f = run_check(path, &co, "fast path: ", &a, &n);
	int kind_mod = 0, mismatch = 0;
	for (size_t i = 0; i < n; i++) {
		kind_mod += !strcmp(f[i].kind, "code-modified") && f[i].from == jcc && f[i].to == jin.target;
		mismatch += !strcmp(f[i].kind, "return-mismatch") && f[i].from == ret && f[i].to == after;
	}
	CHECK_EQ(kind_mod, 1);
	CHECK_EQ(mismatch, 1);
	CHECK_EQ(n, 2);
	struct btr_check_stats st;
	btr_check_get_stats(a, &st);
	CHECK_EQ(st.sampled, 0);
	CHECK_EQ(st.branches, N_OF(kind_case) + N_OF(ret_case));
	btr_analysis_free(a);
	unlink(path);
}

int main(void)
{
	if (access(PROG, R_OK) != 0)
		check_skip("prog_check_smash not built");
	uint64_t vuln = sym_addr(PROG, "vuln"), win = sym_addr(PROG, "win"), mainf = sym_addr(PROG, "main");
	CHECK(vuln && win && mainf);
	struct btr_image *img;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, PROG, BIAS, 0), 0);
	int len = 0, clen = 0;
	uint64_t ret = find_insn(img, vuln + BIAS, BTR_KIND_RET, 0, &len);
	uint64_t call = find_insn(img, mainf + BIAS, BTR_KIND_CALL, vuln + BIAS, &clen);
	CHECK(ret && call);
	btr_image_free(img);

	char path[128];
	snprintf(path, sizeof(path), "/tmp/btr_test_check_%d.btr", (int)getpid());
	struct btr_trace_writer *w = lbr_trace(path, PROG);
	/* newest first */
	struct btr_lbr_entry legit[2] = { { ret, call + (uint64_t)clen, 0, 0 }, { call, vuln + BIAS, 0, 0 } };
	write_lbr(w, legit, 2);
	struct btr_lbr_entry smash[1] = { { ret, win + BIAS, 0, 0 } };
	write_lbr(w, smash, 1);
	struct btr_lbr_entry rop[3] = { { ret, mainf + BIAS, 0, 0 }, { ret, ret, 0, 0 }, { ret, ret, 0, 0 } };
	write_lbr(w, rop, 3);
	struct btr_lbr_entry patched[1] = { { call, win + BIAS, 0, 0 } };
	write_lbr(w, patched, 1);
	CHECK_EQ(btr_trace_writer_close(w), 0);

	struct btr_analysis *a;
	struct btr_check_opts co = { .sz = sizeof(co) };
	size_t n;
	const struct btr_check_finding *f = run_check(path, &co, "", &a, &n);
	int hijack = 0, chain = 0, patch = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(f[i].kind, "return-hijack") && f[i].to == win + BIAS && f[i].severity == BTR_CHECK_HIGH)
			hijack++;
		if (!strcmp(f[i].kind, "rop-chain") && f[i].from == ret)
			chain++;
		if (!strcmp(f[i].kind, "code-modified") && f[i].from == call && f[i].to == win + BIAS)
			patch++;
	}
	CHECK_EQ(n, 3);
	CHECK_EQ(hijack, 1);
	CHECK_EQ(chain, 1);
	CHECK_EQ(patch, 1);
	struct btr_check_stats st;
	btr_check_get_stats(a, &st);
	CHECK_EQ(st.sampled, 1);
	CHECK_EQ(st.branches, 7);
	btr_analysis_free(a);

	/* an allow rule for the hijack's target range removes exactly it */
	char rule[128];
	snprintf(rule, sizeof(rule), "# known\nreturn-hijack 0x%llx-0x%llx\n", (unsigned long long)(win + BIAS),
		 (unsigned long long)(win + BIAS));
	co.allow = rule;
	f = run_check(path, &co, "allowed: ", &a, &n);
	CHECK_EQ(n, 2);
	CHECK(n == 2 && !strcmp(f[0].kind, "rop-chain") && !strcmp(f[1].kind, "code-modified"));
	btr_check_get_stats(a, &st);
	CHECK_EQ(st.allowed, 1);
	btr_analysis_free(a);
	co.allow = "no-such-kind *\n";
	CHECK_EQ(btr_check_new(&co, &a), -BTR_ERR_BAD_FILTER);
	co.allow = "return-hijack\n";
	CHECK_EQ(btr_check_new(&co, &a), -BTR_ERR_BAD_FILTER);

	/* two returns in a row into code no call precedes: already a chain
	 * (one is a return-hijack), naming both targets */
	w = lbr_trace(path, PROG);
	struct btr_lbr_entry rop2[2] = { { ret, mainf + BIAS, 0, 0 }, { ret, ret, 0, 0 } };
	write_lbr(w, rop2, 2);
	CHECK_EQ(btr_trace_writer_close(w), 0);
	co.allow = NULL;
	f = run_check(path, &co, "two returns: ", &a, &n);
	CHECK_EQ(n, 1);
	CHECK(n == 1 && !strcmp(f[0].kind, "rop-chain") && f[0].from == ret && f[0].to == ret &&
	      f[0].severity == BTR_CHECK_HIGH && strstr(f[0].detail, "2 returns in a row"));
	btr_analysis_free(a);
	unlink(path);
	split_functions();
	fast_path();
	model();
	return check_done();
}
