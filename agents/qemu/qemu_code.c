/* qemu_code.c - the plugin's code without a file (docs/record.md, "Code
 * without a file"): JIT compilers, generated and self-modifying code,
 * memfd and deleted files.  No file the decoder can read holds these
 * bytes, but QEMU hands the plugin every TB's bytes when it translates
 * it, and it translates again after the code is rewritten.  So at
 * translation time (never per executed instruction) a TB outside every
 * file-backed module whose bytes differ from what the trace says that
 * address holds is written as a CODE record, after the translating
 * thread's PT so far: a reader applies records in the trace's order, so
 * the thread's earlier flow decodes with the old bytes and its later flow
 * with the new.  Each distinct version's bytes are stored once (a repeat
 * names them by content key).  Other threads' PT still buffered when the
 * code changes decodes with the new bytes (docs/record.md).
 *
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"
#include "image/codepages.h"
#include "image/jitsyms.h"

static struct {
	pthread_mutex_t lock;
	struct codepages *told;    /* what the trace says each address holds */
	struct codeblobs *blobs;   /* the versions written, by content key */
	uint8_t buf[1 << 16];      /* a TB's bytes being gathered */
	uint64_t records, bytes;   /* CODE records written, bytes stored in them */
} code = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Can the decoder read the module file at @path?  Not a memfd, a deleted
 * file, or anything but a regular file. */
int code_file_backed(const char *path)
{
	struct stat st;
	size_t n = strlen(path);
	return path[0] == '/' && !(n > 10 && !strcmp(path + n - 10, " (deleted)")) && strncmp(path, "/memfd:", 7) &&
	       stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Is [@lo, @hi) inside a module the decoder reads from its file? */
static int code_in_file(uint64_t lo, uint64_t hi)
{
	int in = 0;
	pthread_mutex_lock(&g.lock);
	for (unsigned i = 0; i < g.n_mods && !in; i++)
		in = g.mods[i].backed && g.mods[i].start <= lo && hi <= g.mods[i].start + g.mods[i].size;
	pthread_mutex_unlock(&g.lock);
	return in;
}

static void code_write(uint64_t addr, const uint8_t *bytes, size_t n, uint64_t hash, int with_data)
{
	struct btr_record r = { .type = BTR_REC_CODE };
	r.u.code.pid = g.pid;
	r.u.code.addr = addr;
	r.u.code.hash = hash;
	r.u.code.size = (uint32_t)n;
	r.u.code.data = with_data ? bytes : NULL;
	write_rec_ex(&r, 0);   /* reaches the file with the thread's next PT */
	code.records++;
	code.bytes += with_data ? n : 0;
}

/* TB @tb (@n instructions from @pc to @end) was translated. */
void code_seen(struct qemu_plugin_tb *tb, size_t n, uint64_t pc, uint64_t end)
{
	if (end <= pc || end - pc > sizeof(code.buf) || code_in_file(pc, end))
		return;
	pthread_mutex_lock(&code.lock);
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);
		size_t k = qemu_plugin_insn_size(in);
		if (qemu_plugin_insn_vaddr(in) != pc + len || len + k > sizeof(code.buf))
			break;   /* not contiguous: keep what is */
		memcpy(code.buf + len, qemu_plugin_insn_data(in), k);
		len += k;
	}
	if (!code.told && (codepages_new(&code.told) < 0 || codeblobs_new(&code.blobs) < 0)) {
		pthread_mutex_unlock(&code.lock);
		return;
	}
	if (!len || codepages_same(code.told, pc, code.buf, len) || codepages_put(code.told, pc, code.buf, len) < 0) {
		pthread_mutex_unlock(&code.lock);
		return;
	}
	uint64_t h = codeblobs_hash(code.buf, len);
	const uint8_t *known = codeblobs_get(code.blobs, h, len);
	int with_data = !known || memcmp(known, code.buf, len);
	if (with_data)
		codeblobs_put(code.blobs, h, len, code.buf);
	/* The translating thread's flow so far ran the old bytes: it goes
	 * out first (not while a signal's branch waits for its outcome). */
	struct thr *t = code_vcpu >= 0 ? g.thr[code_vcpu] : NULL;
	if (t && !t->done && !t->pend_at) {
		ensure_space(t);
		tnt_flush(t);
		pt_flush(t);
		update_check(t);
	}
	code_write(pc, code.buf, len, h, with_data);
	pthread_mutex_unlock(&code.lock);
}

/* A file was mapped over [@lo, @lo+@size): the trace has its bytes now. */
void code_forget(uint64_t lo, uint64_t size)
{
	pthread_mutex_lock(&code.lock);
	if (code.told)
		codepages_drop(code.told, lo, lo + size);
	pthread_mutex_unlock(&code.lock);
}

static int code_rewrite(void *ctx, uint64_t addr, const uint8_t *bytes, size_t n)
{
	(void)ctx;
	code_write(addr, bytes, n, codeblobs_hash(bytes, n), 1);
	return 0;
}

/* A forked child's new trace: all the code its memory holds, with the
 * bytes (the versions written so far are in the parent's trace). */
void code_fork_child(void)
{
	pthread_mutex_init(&code.lock, NULL);
	if (!code.told)
		return;
	codeblobs_free(code.blobs);
	code.blobs = NULL;
	if (codeblobs_new(&code.blobs) < 0) {
		codepages_free(code.told);
		code.told = NULL;
		return;
	}
	codepages_foreach(code.told, code_rewrite, NULL);
}

/* A file was mapped executable: a jitdump file (whose runtime maps it so
 * that perf sees where it is) is named in DIR/jitdumps ("PID PATH"
 * lines) for `btr record`, which reads it at the end. */
void code_note_jitdump(const char *path)
{
	if (!g.dir || !jit_dump_path(path))
		return;
	char f[PATH_MAX], line[PATH_MAX + 16];
	snprintf(f, sizeof(f), "%s/jitdumps", g.dir);
	int fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	int n = snprintf(line, sizeof(line), "%u %s\n", g.pid, path);
	if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) != n)
		n = -1;   /* nothing to do: the names stay unknown */
	close(fd);
}
