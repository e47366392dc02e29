/* report_write.c - the report analysis' output (report.c: "text", "json";
 * docs/report.md, docs/contract.md). */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "btr/branch.h"
#include "btr/error.h"
#include "btr/text.h"
#include "report_priv.h"

#define TEXT_LOSSES 32    /* causes of lost data listed in the text report */

#define TEXT_MODULES 20   /* modules listed in the text report */
#define TEXT_THREADS 32   /* threads listed in the text report */


static const char *sig_name(int sig)
{
	static char buf[32];
	const char *d = sigabbrev_np(sig);
	if (d) {
		snprintf(buf, sizeof(buf), "SIG%s", d);
		return buf;
	}
	snprintf(buf, sizeof(buf), "signal %d", sig);
	return buf;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* How thread @t ended, for the text report ("" to say nothing). */
static const char *thread_end_text(const struct btr_report_thread *t, int lost, char *buf, size_t size)
{
	switch (t->exited ? t->end : BTR_THREAD_END_UNKNOWN) {
	case BTR_THREAD_END_EXITED:
		snprintf(buf, size, ", exit %" PRId32, t->exit_code);
		return buf;
	case BTR_THREAD_END_KILLED:
		if (t->signo)
			snprintf(buf, size, ", killed by %s", sig_name(t->signo));
		else
			snprintf(buf, size, ", killed by a signal");
		return buf;
	case BTR_THREAD_END_RUNNING:
		return ", still running when the recording stopped";
	default:
		return t->exited ? ", ended (how is not recorded)" : lost ? ", end unknown (the trace is cut)" : "";
	}
}

static const char *const loss_kind[] = { "?", "chunk", "end", "cut", "missing", "flow" };

/* The causes of lost data: JSON array elements. */
static void print_losses_json(FILE *f, const struct btr_stream_loss *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s\n    {\"kind\": \"%s\"", i ? "," : "", loss_kind[l[i].kind < 6 ? l[i].kind : 0]);
		if (l[i].kind == BTR_LOSS_CUT || l[i].kind == BTR_LOSS_MISSING) {
			fprintf(f, ", \"pid\": %" PRIu32 ", \"ppid\": %" PRIu32 ", \"comm\": ", l[i].pid, l[i].ppid);
			btr_json_str(f, l[i].comm);
		}
		if (l[i].offset)
			fprintf(f, ", \"offset\": \"0x%" PRIx64 "\"", l[i].offset);
		fprintf(f, ", \"reason\": ");
		btr_json_str(f, btr_errstr(l[i].reason));
		fprintf(f, ", \"detail\": ");
		btr_json_str(f, l[i].detail);
		fputc('}', f);
	}
}

int btr__report_write_json(FILE *f, const struct btr_report_result *res, const struct btr_report_run *run)
{
	const char *file = run->name;
	int lost = run->lost;
	const struct btr_stream_stats *st = &run->stats;
	const struct btr_stream_loss *losses = run->losses;
	size_t n_losses = run->n_losses;
	fprintf(f, "{\n  \"file\": ");
	btr_json_str(f, file);
	fprintf(f, ",\n  \"backend\": ");
	btr_json_str(f, res->backend);
	if (res->ip_filtered)
		fprintf(f, ",\n  \"ip_filtered\": true");
	if (res->n_ip_ranges) {
		fprintf(f, ",\n  \"ip_ranges\": [");
		for (size_t i = 0; i < res->n_ip_ranges; i++) {
			const struct btr_report_range *x = &res->ip_ranges[i];
			fprintf(f, "%s\n    {\"file\": ", i ? "," : "");
			btr_json_str(f, x->path);
			fprintf(f, ", \"start\": \"0x%" PRIx64 "\", \"end\": \"0x%" PRIx64 "\", \"file_offsets\": %s, "
				   "\"function\": ", x->start, x->end, x->offsets ? "true" : "false");
			btr_json_str(f, x->function);
			fputc('}', f);
		}
		fprintf(f, "\n  ]");
	}
	fprintf(f, ",\n  \"instructions\": %" PRIu64 ",\n  \"has_instructions\": %s", res->insns,
		res->has_insns ? "true" : "false");
	fprintf(f, ",\n  \"tsx_aborts\": %" PRIu64 ",\n  \"aborted_instructions\": %" PRIu64, res->tsx_aborts,
		res->aborted_insns);
	fprintf(f, ",\n  \"branches\": %" PRIu64 ",\n  \"taken\": %" PRIu64 ",\n  \"mispredicted\": %" PRIu64
		   ",\n  \"unclassified\": %" PRIu64,
		res->branches, res->taken, res->mispredicted, res->unclassified);
	fprintf(f, ",\n  \"branches_by_class\": {");
	for (int c = 0; c < BTR_LBR__COUNT; c++)
		fprintf(f, "%s\"%s\": %" PRIu64, c ? ", " : "", btr_lbr_class_name((enum btr_lbr_class)c),
			res->by_class[c]);
	fprintf(f, "},\n  \"branches_by_kind\": {");
	int first = 1;
	for (int k = 1; k < BTR_KIND__COUNT; k++) {
		fprintf(f, "%s\"%s\": %" PRIu64, first ? "" : ", ",
			btr_branch_kind_name((enum btr_branch_kind)k), res->by_kind[k]);
		first = 0;
	}
	fprintf(f, "},\n  \"threads\": %zu,\n  \"thread_list\": [", res->n_threads);
	for (size_t i = 0; i < res->n_threads; i++) {
		const struct btr_report_thread *t = &res->threads[i];
		fprintf(f, "%s\n    {\"tid\": %" PRIu32 ", \"name\": ", i ? "," : "", t->tid);
		btr_json_str(f, t->name);
		fprintf(f, ", \"instructions\": %" PRIu64 ", \"branches\": %" PRIu64, t->insns, t->branches);
		uint32_t end = t->exited && t->end <= BTR_THREAD_END_RUNNING ? t->end : BTR_THREAD_END_UNKNOWN;
		fprintf(f, ", \"end\": \"%s\"", btr_thread_end_name(end));
		/* (an older writer's exit record: exit_code as it says) */
		if (end == BTR_THREAD_END_EXITED || (t->exited && end == BTR_THREAD_END_UNKNOWN))
			fprintf(f, ", \"exit_code\": %" PRId32, t->exit_code);
		if (end == BTR_THREAD_END_KILLED && t->signo) {
			fprintf(f, ", \"signal\": %" PRId32 ", \"signal_name\": ", t->signo);
			btr_json_str(f, sig_name(t->signo));
		}
		fputc('}', f);
	}
	size_t loaded = 0;
	for (size_t i = 0; i < res->n_modules; i++)
		loaded += res->modules[i].loaded != NULL;
	fprintf(f, "%s],\n  \"modules\": %zu,\n  \"modules_loaded\": %zu,\n  \"module_list\": [",
		res->n_threads ? "\n  " : "", res->n_modules, loaded);
	for (size_t i = 0; i < res->n_modules; i++) {
		const struct btr_report_module *m = &res->modules[i];
		fprintf(f, "%s\n    {\"pid\": %" PRIu32 ", \"path\": ", i ? "," : "", m->pid);
		btr_json_str(f, m->path);
		fprintf(f, ", \"start\": \"0x%" PRIx64 "\", \"size\": %" PRIu64 ", \"pgoff\": \"0x%" PRIx64
			   "\", \"loaded\": ",
			m->start, m->size, m->pgoff);
		btr_json_str(f, m->loaded);
		fputc('}', f);
	}
	fprintf(f, "%s],\n  \"gaps\": %" PRIu64 ",\n  \"overflows\": %" PRIu64 ",\n  \"windows\": %" PRIu64
		   ",\n  \"gap_list\": [",
		res->n_modules ? "\n  " : "", res->gaps, res->overflows, res->windows);
	for (size_t i = 0; i < res->n_gap_list; i++) {
		const struct btr_report_gap *g = &res->gap_list[i];
		fprintf(f, "%s\n    {\"tid\": %" PRIu32 ", \"offset\": \"0x%" PRIx64 "\", \"source\": \"%s\", \"reason\": ",
			i ? "," : "", g->tid, g->offset, g->from_flow ? "decoder" : "trace");
		btr_json_str(f, btr_errstr(g->reason));
		fputc('}', f);
	}
	fprintf(f, "%s],\n  \"data_lost\": %s,\n  \"lost\": [", res->n_gap_list ? "\n  " : "", lost ? "true" : "false");
	print_losses_json(f, losses, n_losses);
	fprintf(f, "%s],\n  \"rank_by\": \"%s\",\n  \"functions\": %zu,\n  \"top_functions\": [",
		n_losses ? "\n  " : "", res->rank_by_insns ? "instructions" : "branches", res->n_functions);
	for (size_t i = 0; i < res->n_top_functions; i++) {
		const struct btr_report_func *fn = &res->top_functions[i];
		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		btr_json_str(f, fn->name);
		fprintf(f, ", \"module\": ");
		btr_json_str(f, fn->module);
		fprintf(f, ", \"addr\": \"0x%" PRIx64 "\", \"instructions\": %" PRIu64 ", \"branches\": %" PRIu64
			   ", \"file\": ",
			fn->addr, fn->insns, fn->branches);
		btr_json_str(f, fn->file);
		fprintf(f, ", \"line\": %d}", fn->line);
	}
	fprintf(f, "%s],\n  \"blocks\": %zu,\n  \"top_blocks\": [", res->n_top_functions ? "\n  " : "",
		res->n_blocks);
	for (size_t i = 0; i < res->n_top_blocks; i++) {
		const struct btr_report_block *b = &res->top_blocks[i];
		fprintf(f, "%s\n    {\"start\": \"0x%" PRIx64 "\", \"end\": \"0x%" PRIx64 "\", \"count\": %" PRIu64
			   ", \"instructions\": %" PRIu64 ", \"symbol\": ",
			i ? "," : "", b->start, b->end, b->count, b->insns);
		btr_json_str(f, b->sym);
		fprintf(f, ", \"file\": ");
		btr_json_str(f, b->file);
		fprintf(f, ", \"line\": %d}", b->line);
	}
	fprintf(f, "%s],\n  \"exit\": ", res->n_top_blocks ? "\n  " : "");
	if (!res->exit.valid) {
		fputs("null", f);
	} else {
		const struct btr_report_exit *x = &res->exit;
		fprintf(f, "{\"pid\": %" PRIu32 ", \"tid\": %" PRIu32 ", \"code\": %" PRId32 ", \"signal\": %" PRId32,
			x->pid, x->tid, x->code, x->signo);
		if (x->signo) {
			fprintf(f, ", \"signal_name\": ");
			btr_json_str(f, sig_name(x->signo));
			fprintf(f, ", \"ip\": \"0x%" PRIx64 "\", \"addr\": \"0x%" PRIx64 "\", \"where\": ", x->ip, x->addr);
			btr_json_str(f, x->where);
		}
		fputc('}', f);
	}
	fprintf(f, ",\n  \"untraced\": %" PRIu64 ",\n  \"processes\": [", res->untraced);
	for (size_t i = 0; i < res->n_processes; i++) {
		const struct btr_report_process *p = &res->processes[i];
		fprintf(f, "%s\n    {\"pid\": %" PRIu32 ", \"ppid\": %" PRIu32 ", \"path\": ", i ? "," : "", p->pid,
			p->ppid);
		btr_json_str(f, p->path);
		fprintf(f, ", \"command\": ");
		btr_json_str(f, p->command);
		fprintf(f, ", \"instructions\": %" PRIu64 ", \"branches\": %" PRIu64 ", \"threads\": %" PRIu32
			   ", \"execs\": %" PRIu32, p->insns, p->branches, p->threads, p->execs);
		if (p->exited && p->signo) {
			fprintf(f, ", \"signal\": %" PRId32 ", \"signal_name\": ", p->signo);
			btr_json_str(f, sig_name(p->signo));
		} else if (p->exited) {
			fprintf(f, ", \"exit_code\": %" PRId32, p->code);
		}
		fprintf(f, ", \"untraced\": %s", p->untraced ? "true" : "false");
		if (p->untraced_reason) {
			fprintf(f, ", \"untraced_reason\": ");
			btr_json_str(f, p->untraced_reason);
		}
		if (p->lost) {
			fprintf(f, ", \"trace_lost\": \"%s\", \"lost_reason\": ", p->lost == 2 ? "missing" : "cut");
			btr_json_str(f, p->lost_reason);
		}
		fputc('}', f);
	}
	fprintf(f, "%s]", res->n_processes ? "\n  " : "");
	fprintf(f, ",\n  \"stats\": {\"records\": %" PRIu64 ", \"pt_bytes\": %" PRIu64 ", \"bts_bytes\": %" PRIu64
		   ", \"lbr_snapshots\": %" PRIu64 ", \"filtered\": %" PRIu64 ", \"modules_missing\": %u"
		   ", \"buildid_mismatch\": %u}\n}\n",
		st->records, st->pt_bytes, st->bts_bytes, st->lbr_snapshots, st->filtered, st->modules_missing,
		st->buildid_mismatch);
	return 0;
}

#define TEXT_PROCESSES 64   /* processes listed in the text report */

/* Prints process @i and its descendants (start order), indented by depth;
 * @done NULL (no memory for it): @i alone, unindented. */
static void print_proc_tree(FILE *f, const struct btr_report_result *res, size_t i, unsigned depth,
			    unsigned char *done, size_t *shown, int has_insns)
{
	const struct btr_report_process *p = &res->processes[i];
	if (done)
		done[i] = 1;
	if (*shown < TEXT_PROCESSES) {
		(*shown)++;
		fprintf(f, "  %*spid %" PRIu32, (int)(2 * (depth < 16 ? depth : 16)), "", p->pid);
		if (p->ppid)
			fprintf(f, " (ppid %" PRIu32 ")", p->ppid);
		fputc(' ', f);
		btr_text_str(f, p->command[0] ? p->command : p->path[0] ? p->path : "?", 0);
		if (p->execs && p->programs && p->programs[0]) {   /* argv is the last program's */
			fprintf(f, " [%" PRIu32 " exec%s: ", p->execs, p->execs > 1 ? "s" : "");
			btr_text_str(f, p->programs, 0);
			fputc(']', f);
		}
		fputs(":", f);
		if (has_insns)
			fprintf(f, " %" PRIu64 " instructions,", p->insns);
		fprintf(f, " %" PRIu64 " branches", p->branches);
		if (p->threads > 1)
			fprintf(f, ", %" PRIu32 " threads", p->threads);
		if (p->exited && p->signo)
			fprintf(f, ", killed by %s", sig_name(p->signo));
		else if (p->exited)
			fprintf(f, ", exit %" PRId32, p->code);
		if (p->untraced) {
			fprintf(f, ", untraced (");
			btr_text_str(f, p->untraced_reason ? p->untraced_reason : "?", 0);
			fputc(')', f);
		}
		if (p->lost) {
			fprintf(f, ", %s (", p->lost == 2 ? "no trace" : "trace cut while it ran");
			btr_text_str(f, p->lost_reason ? p->lost_reason : "?", 0);
			fputc(')', f);
		}
		fputc('\n', f);
	}
	for (size_t j = i + 1; done && j < res->n_processes; j++)
		if (!done[j] && res->processes[j].ppid == p->pid)
			print_proc_tree(f, res, j, depth + 1, done, shown, has_insns);
}

/* @done: n_processes zeroed bytes (the caller allocates them, so that
 * running out of memory is an error and not a missing list). */
static void print_processes(FILE *f, const struct btr_report_result *res, unsigned char *done)
{
	if (!res->n_processes)
		return;
	fprintf(f, "processes:    %zu", res->n_processes);
	if (res->untraced)
		fprintf(f, " (%" PRIu64 " untraced)", res->untraced);
	fputc('\n', f);
	size_t shown = 0;
	for (size_t i = 0; i < res->n_processes; i++)
		if (!done || !done[i])
			print_proc_tree(f, res, i, 0, done, &shown, res->has_insns);
	if (res->n_processes > shown)
		fprintf(f, "  ... %zu more (--format json lists all)\n", res->n_processes - shown);
}

/* The program name of process @pid ("?" if unknown). */
static const char *proc_comm(const struct btr_report_result *res, uint32_t pid)
{
	for (size_t i = 0; i < res->n_processes; i++) {
		const struct btr_report_process *p = &res->processes[i];
		if (p->pid != pid)
			continue;
		const char *path = p->path[0] ? p->path : p->command;
		const char *b = strrchr(path, '/');
		return b && b[1] ? b + 1 : path[0] ? path : "?";
	}
	return "?";
}

/* Modules: one line per file (recorded path and the file used), with the
 * processes that mapped it when the trace has several; files with code
 * first.  Mappings are grouped by their files through a hash table, so
 * that many modules (a hostile trace's 20,000 long paths) cost a pass
 * each, never a pass over all the others. */
#define TEXT_MODULE_PIDS 4   /* processes named on a module line */
static int same_file(const struct btr_report_module *a, const struct btr_report_module *b)
{
	return !strcmp(a->path, b->path) && !a->loaded == !b->loaded && (!a->loaded || !strcmp(a->loaded, b->loaded));
}

static uint64_t str_hash(uint64_t h, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return (h ^ 0xff) * 0x100000001b3ull;
}

/* head[i]: the first mapping of module i's file (by path alone with
 * @by_path); next[i]: the next mapping of that file after i, or SIZE_MAX.
 * Returns 0 or -BTR_ERR_NOMEM. */
static int group_modules(const struct btr_report_result *res, int by_path, size_t *head, size_t *next)
{
	size_t n = res->n_modules, cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	size_t *tab = malloc(cap * sizeof(*tab)), *last = malloc((n ? n : 1) * sizeof(*last));
	if (!tab || !last) {
		free(tab);
		free(last);
		return -BTR_ERR_NOMEM;
	}
	for (size_t k = 0; k < cap; k++)
		tab[k] = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		const struct btr_report_module *m = &res->modules[i];
		uint64_t h = str_hash(0xcbf29ce484222325ull, m->path);
		if (!by_path)
			h = m->loaded ? str_hash(h, m->loaded) : h + 1;
		size_t k = (size_t)(h * 0x9e3779b97f4a7c15ull >> 17) & (cap - 1);
		for (; tab[k] != SIZE_MAX; k = (k + 1) & (cap - 1)) {
			const struct btr_report_module *o = &res->modules[tab[k]];
			if (by_path ? !strcmp(o->path, m->path) : same_file(o, m))
				break;
		}
		next[i] = SIZE_MAX;
		if (tab[k] == SIZE_MAX) {
			tab[k] = i;
			head[i] = last[i] = i;
		} else {
			size_t g = tab[k];
			head[i] = g;
			next[last[g]] = i;
			last[g] = i;
		}
	}
	free(tab);
	free(last);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* @tmp: room for a pid per mapping */
static void print_module_group(FILE *f, const struct btr_report_result *res, size_t i, const size_t *next,
			       uint32_t *tmp)
{
	const struct btr_report_module *m = &res->modules[i];
	size_t n_pids = 0, n_addrs = 1, n_all = 0;
	uint32_t pids[TEXT_MODULE_PIDS];
	const char *progs[TEXT_MODULE_PIDS];
	for (size_t j = i; j != SIZE_MAX; j = next[j]) {
		const struct btr_report_module *o = &res->modules[j];
		if (j > i && (o->start != m->start || o->size != m->size))
			n_addrs++;
		tmp[n_all++] = o->pid;
		int seen = 0;   /* the first processes, in their order */
		for (size_t k = 0; k < n_pids && k < TEXT_MODULE_PIDS && !seen; k++)
			seen = pids[k] == o->pid;
		if (!seen && n_pids < TEXT_MODULE_PIDS) {
			pids[n_pids] = o->pid;
			/* the program it ran then: a child maps its parent's
			 * shell before it execs another program */
			progs[n_pids++] = o->program && o->program[0] ? o->program : proc_comm(res, o->pid);
		}
	}
	if (n_pids == TEXT_MODULE_PIDS) {   /* how many in all */
		qsort(tmp, n_all, sizeof(*tmp), cmp_u32);
		n_pids = 0;
		for (size_t k = 0; k < n_all; k++)
			n_pids += !k || tmp[k] != tmp[k - 1];
	}
	fprintf(f, "  0x%" PRIx64 "-0x%" PRIx64 " ", m->start, m->start + m->size);
	btr_text_str(f, m->path, 0);
	if (m->loaded && strcmp(m->loaded, m->path)) {
		fprintf(f, " -> ");
		btr_text_str(f, m->loaded, 0);
	} else if (!m->loaded) {
		fprintf(f, " (no code)");
	}
	if (n_addrs > 1)
		fprintf(f, " (and %zu more mappings)", n_addrs - 1);
	if (res->n_processes > 1) {
		if (n_pids == 1) {
			fprintf(f, "  [pid %" PRIu32 " ", pids[0]);
			btr_text_str(f, progs[0], 0);
			fputc(']', f);
		} else {
			fprintf(f, "  [%zu processes:", n_pids);
		}
		for (size_t k = 0; n_pids > 1 && k < n_pids && k < TEXT_MODULE_PIDS; k++) {
			fprintf(f, "%s %" PRIu32 " ", k ? "," : "", pids[k]);
			btr_text_str(f, progs[k], 0);
		}
		if (n_pids > 1)
			fprintf(f, "%s]", n_pids > TEXT_MODULE_PIDS ? ", ..." : "");
	}
	fputc('\n', f);
}

static int print_modules(FILE *f, const struct btr_report_result *res)
{
	size_t n = res->n_modules, loaded = 0, files = 0;
	size_t *head = malloc((n ? n : 1) * sizeof(*head)), *next = malloc((n ? n : 1) * sizeof(*next));
	uint32_t *tmp = malloc((n ? n : 1) * sizeof(*tmp));
	int rc = head && next && tmp ? group_modules(res, 1, head, next) : -BTR_ERR_NOMEM;
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		loaded += res->modules[i].loaded != NULL;
		files += head[i] == i;
	}
	if ((rc = group_modules(res, 0, head, next)) < 0)
		goto out;
	fprintf(f, "modules:      %zu (%zu with code loaded)", n, loaded);
	if (res->n_processes > 1)
		fprintf(f, ", %zu files in %zu processes", files, res->n_processes);
	fputc('\n', f);
	/* Modules with code first: they are what the report can name. */
	size_t shown = 0, left = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			const struct btr_report_module *m = &res->modules[i];
			if ((pass == 0) != (m->loaded != NULL) || head[i] != i)
				continue;
			if (pass == 1 && shown >= TEXT_MODULES) {
				left++;
				continue;
			}
			print_module_group(f, res, i, next, tmp);
			shown++;
		}
	}
	if (left)
		fprintf(f, "  ... %zu more files without code (--format json lists all)\n", left);
out:
	free(head);
	free(next);
	free(tmp);
	return rc;
}

int btr__report_write_text(FILE *f, const struct btr_report_result *res, const struct btr_report_run *run)
{
	const char *file = run->name;
	int lost = run->lost;
	const struct btr_stream_stats *st = &run->stats;
	const struct btr_stream_loss *losses = run->losses;
	size_t n_losses = run->n_losses;
	/* processes listed (zeroed bytes, allocated first so that running out
	 * of memory is an error and not a missing list) */
	unsigned char *done = calloc(res->n_processes + 1, 1);
	if (!done)
		return -BTR_ERR_NOMEM;
	fprintf(f, "trace:        ");
	btr_text_str(f, file, 0);
	fputc('\n', f);
	fprintf(f, "backend:      ");
	btr_text_str(f, res->backend[0] ? res->backend : "(unknown)", 0);
	if (res->ip_filtered)
		fprintf(f, " (IP filter: only the flow inside the ranges is traced)");
	fputc('\n', f);
	for (size_t i = 0; i < res->n_ip_ranges; i++) {
		const struct btr_report_range *x = &res->ip_ranges[i];
		fprintf(f, "ip filter:    %s0x%" PRIx64 "-0x%" PRIx64 "%s", x->offsets ? "file offsets " : "", x->start,
			x->end, x->path[0] ? "@" : "");
		btr_text_str(f, x->path, 0);
		if (x->function[0]) {
			fputs(" (", f);
			btr_text_str(f, x->function, 0);
			fputc(')', f);
		}
		fputc('\n', f);
	}
	if (res->has_insns)
		fprintf(f, "instructions: %" PRIu64 "\n", res->insns);
	else if (!st->records)   /* a header alone: FILE.tmp.PID of a recording still running */
		fprintf(f, "instructions: unknown (the trace holds no data yet: a recording still being written, or "
			"one cut before its first chunk)\n");
	else
		fprintf(f, "instructions: unknown (this trace has no instruction counts)\n");
	if (res->tsx_aborts)
		fprintf(f, "aborted instructions: %" PRIu64 " (in %" PRIu64 " aborted TSX transaction%s; counted above)\n",
			res->aborted_insns, res->tsx_aborts, res->tsx_aborts > 1 ? "s" : "");
	fprintf(f, "branches:     %" PRIu64 " (taken %" PRIu64, res->branches, res->taken);
	if (res->mispredicted)
		fprintf(f, ", mispredicted %" PRIu64, res->mispredicted);
	if (st->filtered)
		fprintf(f, ", %" PRIu64 " more not matching the filter", st->filtered);
	fprintf(f, ")\n  by class:  ");
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++)
		fprintf(f, " %s %" PRIu64, btr_lbr_class_name((enum btr_lbr_class)c), res->by_class[c]);
	if (res->unclassified)
		fprintf(f, " unclassified %" PRIu64, res->unclassified);
	fprintf(f, "\n  privilege: cpl_neq_0 (user) %" PRIu64 ", cpl_eq_0 (kernel) %" PRIu64 "\n",
		res->by_class[BTR_LBR_CPL_NEQ_0], res->by_class[BTR_LBR_CPL_EQ_0]);
	fprintf(f, "  by kind:  ");
	int any = 0;
	for (int k = 1; k < BTR_KIND__COUNT; k++) {
		if (res->by_kind[k]) {
			fprintf(f, " %s %" PRIu64, btr_branch_kind_name((enum btr_branch_kind)k), res->by_kind[k]);
			any = 1;
		}
	}
	if (!any)
		fprintf(f, " (none)");
	fprintf(f, "\nthreads:      %zu\n", res->n_threads);
	/* Threads with branches, by tid; idle ones (names from a system-wide
	 * recording) only in JSON. */
	size_t shown_thr = 0;
	for (size_t i = 0; i < res->n_threads; i++) {
		const struct btr_report_thread *t = &res->threads[i];
		if (!t->branches || shown_thr == TEXT_THREADS)
			continue;
		shown_thr++;
		fprintf(f, "  tid %-8" PRIu32, t->tid);
		if (t->name) {
			fputc(' ', f);
			btr_text_str(f, t->name, 0);
			fprintf(f, "%*s", (int)(strlen(t->name) < 16 ? 16 - strlen(t->name) : 0), "");
		}
		if (res->has_insns)
			fprintf(f, " %" PRIu64 " instructions,", t->insns);
		fprintf(f, " %" PRIu64 " branches", t->branches);
		char buf[64];
		fputs(thread_end_text(t, lost, buf, sizeof(buf)), f);
		fputc('\n', f);
	}
	if (res->n_threads > shown_thr)
		fprintf(f, "  ... %zu more without branches or not shown (--format json lists all)\n",
			res->n_threads - shown_thr);
	if (print_modules(f, res) < 0) {
		free(done);
		return -BTR_ERR_NOMEM;
	}
	fprintf(f, "gaps:         %" PRIu64, res->gaps);
	if (res->overflows)
		fprintf(f, " (%" PRIu64 " overflows)", res->overflows);
	fputc('\n', f);
	for (size_t i = 0; i < res->n_gap_list; i++) {
		const struct btr_report_gap *g = &res->gap_list[i];
		fprintf(f, "  tid %" PRIu32 " at %s offset 0x%" PRIx64 ": %s\n", g->tid,
			g->from_flow ? "PT stream" : "trace", g->offset, btr_errstr(g->reason));
	}
	if (res->gaps > res->n_gap_list)
		fprintf(f, "  ... %" PRIu64 " more\n", res->gaps - res->n_gap_list);
	if (res->windows)
		fprintf(f, "windows:      %" PRIu64 " snapshots, each decoded on its own (not joined)\n", res->windows);
	fprintf(f, "data lost:    %s\n", lost ? "yes (the report covers what was read)" : "no");
	for (size_t i = 0; i < n_losses && i < TEXT_LOSSES; i++) {
		const struct btr_stream_loss *l = &losses[i];
		if (l->kind == BTR_LOSS_CHUNK)
			fprintf(f, "  damaged chunk at offset 0x%" PRIx64 " skipped\n", l->offset);
		else if (l->kind == BTR_LOSS_END)
			fprintf(f, "  the trace is cut at offset 0x%" PRIx64 ": %s\n", l->offset, btr_errstr(l->reason));
		else if (l->kind == BTR_LOSS_FLOW) {
			fprintf(f, "  the flow of ");
			btr_text_str(f, l->detail, 0);
			fprintf(f, " is unknown at one place\n");
		} else {
			fprintf(f, "  pid %" PRIu32 " ", l->pid);
			btr_text_str(f, l->comm[0] ? l->comm : "?", 0);
			fprintf(f, ": %s\n", l->kind == BTR_LOSS_MISSING ? "no trace at all"
				: l->offset ? "the trace ends before its exit" : "its trace stops while it ran on");
		}
	}
	if (n_losses > TEXT_LOSSES)
		fprintf(f, "  ... %zu more (--format json lists all)\n", n_losses - TEXT_LOSSES);
	if (res->exit.valid) {
		const struct btr_report_exit *x = &res->exit;
		if (x->signo) {
			fprintf(f, "exit:         killed by %s", sig_name(x->signo));
			if (x->ip) {
				fprintf(f, " at 0x%" PRIx64 " ", x->ip);
				btr_text_str(f, x->where, 0);
			}
			if (x->addr)
				fprintf(f, " (address 0x%" PRIx64 ")", x->addr);
			fprintf(f, ", tid %" PRIu32 "\n", x->tid);
		} else {
			fprintf(f, "exit:         code %" PRId32 "\n", x->code);
		}
	} else {
		fprintf(f, "exit:         (not recorded)\n");
	}
	print_processes(f, res, done);

	const char *by = res->rank_by_insns ? "instructions" : "branches";
	uint64_t total = res->rank_by_insns ? res->insns : res->branches;
	fprintf(f, "\ntop functions by %s", by);
	if (!res->rank_by_insns)
		fprintf(f, " leaving them (no instruction counts in this trace)");
	fprintf(f, ":\n");
	if (!res->n_top_functions)
		fprintf(f, "  (none)\n");
	for (size_t i = 0; i < res->n_top_functions; i++) {
		const struct btr_report_func *fn = &res->top_functions[i];
		uint64_t v = res->rank_by_insns ? fn->insns : fn->branches;
		fprintf(f, "  %12" PRIu64 " %5.1f%%  0x%-14" PRIx64 " ", v, pct(v, total), fn->addr);
		btr_text_str(f, fn->name, 0);
		if (fn->file) {
			fputs("  ", f);
			btr_text_str(f, fn->file, 0);
			fprintf(f, ":%d", fn->line);
		} else if (fn->module) {
			fputs("  (", f);
			btr_text_str(f, fn->module, 0);
			fputc(')', f);
		}
		fputc('\n', f);
	}
	fprintf(f, "\ntop basic blocks by %s:\n", by);
	if (!res->n_top_blocks)
		fprintf(f, "  (none)\n");
	for (size_t i = 0; i < res->n_top_blocks; i++) {
		const struct btr_report_block *b = &res->top_blocks[i];
		uint64_t v = res->rank_by_insns ? b->insns : b->count;
		fprintf(f, "  %12" PRIu64 " %5.1f%%  0x%" PRIx64 "-0x%" PRIx64 " x%" PRIu64 "  %s", v, pct(v, total),
			b->start, b->end, b->count, "");
		btr_text_str(f, b->sym, 0);
		if (b->file) {
			fputs("  ", f);
			btr_text_str(f, b->file, 0);
			fprintf(f, ":%d", b->line);
		}
		fputc('\n', f);
	}
	free(done);
	return 0;
}
