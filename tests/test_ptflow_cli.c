/* test_ptflow_cli: `btr pt decode` end to end.  A generated code image
 * and walk (ptgen.h) are written as code.bin + trace.pt; a stepped run of
 * prog_flow_loops, filtered to main, as loops.pt decoded with --elf.  The
 * CLI's counts, branch lines, instruction lines and exit codes are
 * checked against what the generator/stepper know happened. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "stepper.h"
#include "ptsynth.h"
#include "ptgen.h"

static char btr[1024], dir[1024];

/* Runs @cmd (through sh) and returns its exit code; stdout in *@out. */
static int run(const char *cmd, char **out, size_t *len)
{
	char full[8192];
	snprintf(full, sizeof(full), "%s 2>%s/stderr.txt", cmd, dir);
	FILE *p = popen(full, "r");
	if (!p)
		return -1;
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);
	size_t r;
	while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += r;
		if (n + 1 == cap)
			buf = realloc(buf, cap *= 2);
	}
	buf[n] = 0;
	int st = pclose(p);
	if (out)
		*out = buf;
	else
		free(buf);
	if (len)
		*len = n;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long count_lines(const char *s, const char *must_contain)
{
	long n = 0;
	for (const char *l = s; *l;) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);
		if (!must_contain || (memmem(l, len, must_contain, strlen(must_contain))))
			n++;
		l += len + (e ? 1 : 0);
	}
	return n;
}

static uint64_t json_u64(const char *s, const char *key)
{
	char k[64];
	snprintf(k, sizeof(k), "\"%s\": ", key);
	const char *p = strstr(s, k);
	return p ? strtoull(p + strlen(k), NULL, 10) : (uint64_t)-1;
}

static int write_file(const char *path, const void *buf, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(buf, 1, n, f);
	fclose(f);
	return w == n ? 0 : -1;
}

int main(void)
{
	snprintf(btr, sizeof(btr), "%s/btr", BTR_BINARY_DIR);
	snprintf(dir, sizeof(dir), "%s/ptflow_cli", BTR_BINARY_DIR);
	if (access(btr, X_OK))
		check_skip("btr binary not built");
	mkdir(dir, 0755);
	char cmd[4096], *out;
	size_t len;

	/* ---- generated image and walk ---- */
	struct ptgen g;
	memset(&g, 0, sizeof(g));
	ptgen_code(&g, 0x400000, 64);
	ptgen_walk(&g, 200000, 7, 4096);
	char code[1100], trace[1100];
	snprintf(code, sizeof(code), "%s/code.bin", dir);
	snprintf(trace, sizeof(trace), "%s/trace.pt", dir);
	CHECK_EQ(write_file(code, g.code, g.code_size), 0);
	CHECK_EQ(write_file(trace, g.pt, g.pt_size), 0);

	snprintf(cmd, sizeof(cmd), "%s pt decode %s --raw %s:0x400000 --stat --format json", btr, trace, code);
	CHECK_EQ(run(cmd, &out, NULL), 0);
	CHECK_EQ(json_u64(out, "instructions"), g.insns);
	CHECK_EQ(json_u64(out, "branches"), g.branches);
	CHECK_EQ(json_u64(out, "gaps"), 0);
	CHECK_EQ(json_u64(out, "trace_bytes"), g.pt_size);
	CHECK(strstr(out, "\"jcc\": ") != NULL);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s pt decode %s --raw %s:0x400000 --stat --format json -j 2", btr, trace, code);
	CHECK_EQ(run(cmd, &out, NULL), 0);
	CHECK_EQ(json_u64(out, "instructions"), g.insns);
	CHECK_EQ(json_u64(out, "branches"), g.branches);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s pt decode %s --raw %s:0x400000 --branches", btr, trace, code);
	CHECK_EQ(run(cmd, &out, NULL), 0);
	CHECK_EQ(count_lines(out, " -> 0x"), (long)g.branches);
	CHECK_EQ(count_lines(out, " jcc"), (long)g.by_kind[BTR_KIND_JCC]);
	CHECK_EQ(count_lines(out, " ret"), (long)g.by_kind[BTR_KIND_RET]);
	CHECK_EQ(count_lines(out, " call_ind"), (long)g.by_kind[BTR_KIND_CALL_IND]);
	CHECK(!strncmp(out, "[enable 0x400000]\n", 18));
	/* the first branch: L0's jne in function 0 at 0x400008 */
	CHECK(strstr(out, "\n0x400008 -> 0x") != NULL);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s pt decode %s --raw %s:0x400000 --insn", btr, trace, code);
	CHECK_EQ(run(cmd, &out, &len), 0);
	CHECK_EQ(count_lines(out, NULL) - count_lines(out, "["), (long)g.insns);
	CHECK(strstr(out, "\n0000000000400000\n0000000000400004\n0000000000400008\n") != NULL);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s pt decode %s --raw %s:0x400000 --insn --disasm | head -3", btr, trace, code);
	CHECK_EQ(run(cmd, &out, NULL), 0);
	CHECK(strstr(out, "0000000000400000  add") != NULL);
	free(out);

	/* code missing for the whole stream: gaps, no crash, exit 0 */
	snprintf(cmd, sizeof(cmd), "%s pt decode %s --stat --format json", btr, trace);
	CHECK_EQ(run(cmd, &out, NULL), 0);
	CHECK(json_u64(out, "gaps") > 0);
	CHECK_EQ(json_u64(out, "instructions"), 0);
	free(out);

	/* usage and runtime errors */
	snprintf(cmd, sizeof(cmd), "%s pt decode --help", btr);
	CHECK_EQ(run(cmd, NULL, NULL), 0);
	snprintf(cmd, sizeof(cmd), "%s pt decode %s --bogus", btr, trace);
	CHECK_EQ(run(cmd, NULL, NULL), 2);
	snprintf(cmd, sizeof(cmd), "%s pt decode", btr);
	CHECK_EQ(run(cmd, NULL, NULL), 2);
	snprintf(cmd, sizeof(cmd), "%s pt decode %s --cpu x", btr, trace);
	CHECK_EQ(run(cmd, NULL, NULL), 2);
	snprintf(cmd, sizeof(cmd), "%s pt decode %s/nonexistent.pt", btr, dir);
	CHECK_EQ(run(cmd, NULL, NULL), 3);
	{
		char errf[1200];
		snprintf(errf, sizeof(errf), "%s/stderr.txt", dir);
		FILE *f = fopen(errf, "r");
		char line[512] = "";
		int lines = 0;
		while (f && fgets(line, sizeof(line), f))
			lines++;
		if (f)
			fclose(f);
		CHECK_EQ(lines, 1);
	}
	snprintf(cmd, sizeof(cmd), "%s pt decode %s --elf %s/nonexistent.elf", btr, trace, dir);
	CHECK_EQ(run(cmd, NULL, NULL), 3);
	ptgen_free(&g);

	/* ---- a real execution, decoded with --elf at its load bias ---- */
	char prog[1100];
	snprintf(prog, sizeof(prog), "%s/prog_flow_loops", BTR_BINARY_DIR);
	char *argv[] = { prog, NULL };
	struct step_trace t;
	if (!step_available()) {
		printf("ptrace not permitted: --elf part skipped\n");
	} else if (access(prog, X_OK) == 0 && step_run(argv, 200000, &t) == 0) {
		struct synth_opts so = { .filter_lo = t.main_lo, .filter_hi = t.main_hi };
		struct synth_out o;
		CHECK_EQ(synth_run(t.ip, t.fault, t.n, t.end_ip, t.img, &so, &o), 0);
		char loops[1100];
		snprintf(loops, sizeof(loops), "%s/loops.pt", dir);
		CHECK_EQ(write_file(loops, o.buf, o.size), 0);
		snprintf(cmd, sizeof(cmd), "%s pt decode %s --elf %s:0x%llx --insn --ip-filter 0x%llx-0x%llx",
			 btr, loops, prog, (unsigned long long)t.exe_base, (unsigned long long)t.main_lo,
			 (unsigned long long)t.main_hi);
		CHECK_EQ(run(cmd, &out, NULL), 0);
		/* compare every instruction line with the expected sequence */
		size_t k = 0;
		int bad = 0;
		for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
			if (l[0] == '[')
				continue;
			if (k >= o.nexpect || strtoull(l, NULL, 16) != o.expect[k] || strlen(l) != 16)
				bad++;
			k++;
		}
		CHECK_EQ(k, o.nexpect);
		CHECK_EQ(bad, 0);
		CHECK(o.nexpect > 100);
		free(out);
		synth_free(&o);
		step_trace_free(&t);
	} else {
		CHECK(0);
	}
	return check_done();
}
