/* dwarf_line.c - DWARF line tables (versions 2 to 5, 32- and 64-bit
 * DWARF) read from .debug_line alone: see dwarf_line.h.
 *
 * libdw is the oracle (tests/test_dwarf_line.c compares every row): each
 * line program is run as libdw's read_srclines runs it (the same checks
 * that fail a whole CU, the same file table: index 0 "???" before DWARF 5,
 * a relative name joined with its directory, directory 0 being the CU's
 * DW_AT_comp_dir before DWARF 5), and the rows of all programs are sorted
 * by (address, end of sequence first, program, row), which is libdw's
 * order within each CU's table.  A lookup takes the last row at or below
 * the address, as dwfl_module_getsrc does in the CU's table. */
#include "dwarf_line.h"
#include "dwarf_read.h"
#include "elf_priv.h"
#include "internal.h"
#include "btr/error.h"

#include <dwarf.h>
#include <gelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define END_BIT 0x80000000u
#define LAST_BIT 0x40000000u   /* the last row of its program: an end too */
#define ENDS (END_BIT | LAST_BIT)
#define FILE_OF(r) ((r)->file & ~ENDS)

struct dwl_file {
	const char *dir;       /* NULL: none (or DWARF 2-4 directory 0: comp_dir) */
	const char *name;      /* NULL: no such file (a file index out of range) */
	char *path;            /* the joined path, built at first use */
	uint32_t prog;         /* index of its line program */
};

struct dwl_row {
	uint64_t addr;
	int32_t line;
	uint32_t file;         /* index into files; END_BIT: ends a sequence */
};

struct dwl_prog {
	uint64_t off;          /* offset in .debug_line (DW_AT_stmt_list) */
	unsigned version;
	const char *comp_dir;  /* DWARF 2-4: DW_AT_comp_dir of the CU DIE, or NULL */
	uint32_t files0;       /* lazy table: its first file in files, once read */
	uint32_t nfiles;       /* lazy table: its files (0: not read yet) */
};

/* A sequence of a lazy table: [lo, hi) from its first row to its end of
 * sequence, the offset of its first opcode; its rows once decoded.
 *
 * Rows at the address of the end (SEQ_TAIL; gcc makes them) sort after
 * the end: they answer for the addresses up to the next sequence, unless
 * they are the greatest rows of their program (SEQ_TOP), which libdw
 * takes for an end (LAST_BIT). */
struct dwl_seq {
	uint64_t lo, hi;
	uint64_t off;
	uint32_t prog;
	uint32_t nrows;        /* the end of sequence included */
	uint32_t flags;
	struct dwl_row *rows;  /* NULL until the first lookup in it */
};
#define SEQ_TAIL 1u
#define SEQ_TOP 2u

struct btr_dwline {
	struct dwl_row *rows;  /* full table: every row, sorted; lazy: NULL */
	size_t nrows;
	struct dwl_seq *seqs;  /* lazy table: sorted by lo, disjoint */
	size_t nseqs;
	struct btr_dwline_secs secs;   /* lazy table: the bytes, to decode */
	struct dwl_row *scratch;       /* lazy table: decoding space */
	size_t capscratch;
	const char **dirs;             /* lazy table: decoding space */
	size_t capdirs;
	struct dwl_file *files;
	size_t nfiles, capfiles;
	struct dwl_prog *progs;
	size_t nprogs;
	Elf *elf;              /* owned (from_elf) */
	void *bufs[5];         /* decompressed sections, owned */
	pthread_mutex_t lock;  /* lookups: building paths, decoding sequences */
	struct pblock *pblocks; /* joined paths and decoded rows (blk_alloc) */
	char *pnext;
	size_t pleft;
};

/* Joined paths and decoded rows are carved from blocks: a file table of
 * libc has 75,000 files, and one allocation per path made `btr cov` of a
 * small program 3000 allocations (and the allocation torture test ran
 * out of time). */
#define PBLOCK 65536
struct pblock {
	struct pblock *prev;
	_Alignas(8) char s[];
};

static void *blk_alloc(struct btr_dwline *t, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	if (n > t->pleft) {
		size_t sz = n > PBLOCK ? n : PBLOCK;
		struct pblock *b = malloc(sizeof(*b) + sz);
		if (!b)
			return NULL;
		b->prev = t->pblocks;
		t->pblocks = b;
		t->pnext = b->s;
		t->pleft = sz;
	}
	char *p = t->pnext;
	t->pnext += n;
	t->pleft -= n;
	return p;
}

static int key_cmp(const struct dwl_row *a, const struct dwl_row *b);

/* ---- building ----------------------------------------------------------- */

struct run {
	size_t start, len;
	uint64_t addr;         /* the key of its first row (address, end) */
	int end;
};

/* How run_program runs a line program. */
enum mode {
	FULL,    /* every row into rows, files into files */
	INDEX,   /* only its sequences into seqs (files are read, then dropped) */
	SEQ,     /* the rows of the one sequence at seq_off */
};

struct build {
	const struct btr_dwline_secs *s;
	struct dwl_row *rows;
	size_t nrows, caprows;
	struct dwl_file *files;
	size_t nfiles, capfiles;
	struct dwl_prog *progs;
	size_t nprogs, capprogs;
	int alt;               /* a name in a dwz alt file was met */
	const char **dirs;     /* the directories of the program being run */
	size_t capdirs;
	struct run *runs;      /* sorted stretches of rows, in row order */
	size_t nruns, capruns;
	enum mode mode;
	struct dwl_seq *seqs;  /* INDEX */
	size_t nseqs, capseqs;
	int complex;           /* INDEX: a program no index can stand for */
	uint64_t seq_off;      /* SEQ: where the sequence's opcodes start */
	uint32_t seq_prog;     /* SEQ: the program's index */
	int files_known;       /* SEQ: the program's files are in the table, */
	uint32_t files_base;   /* from this index, */
	uint32_t known_nfiles; /* this many (the header's) */
};

static int grow_arr(void **p, size_t *cap, size_t need, size_t elem)
{
	return btr__grow(p, cap, need, elem, 64);
}

/* INDEX: the sequence being run. */
struct seqtrack {
	uint64_t start;        /* offset of its first opcode */
	uint64_t lo, last, last_line;
	size_t nrows, nlines;  /* rows, rows that are no end */
	int mono;              /* addresses never went down */
};

/* INDEX: row (@addr, @end) of the program @prog.  A sequence whose rows
 * go down makes the index unable to stand for the sorted table
 * (b->complex). */
static int index_row(struct build *b, struct seqtrack *q, uint32_t prog, uint64_t addr, int end,
		     uint64_t next)
{
	if (q->nrows && addr < q->last)
		q->mono = 0;
	if (!q->nrows++)
		q->lo = addr;
	q->last = addr;
	if (!end) {
		q->last_line = addr;
		q->nlines++;
		return 0;
	}
	if (!q->mono || q->nrows > UINT32_MAX)
		b->complex = 1;
	if (grow_arr((void **)&b->seqs, &b->capseqs, b->nseqs + 1, sizeof(*b->seqs)))
		return -1;
	b->seqs[b->nseqs++] = (struct dwl_seq){ .lo = q->nlines ? q->lo : addr, .hi = addr,
					      .off = q->start, .prog = prog,
					      .nrows = (uint32_t)q->nrows,
					      .flags = q->nlines && q->last_line == addr ? SEQ_TAIL : 0 };
	*q = (struct seqtrack){ .start = next, .mono = 1 };
	return 0;
}

static int add_file(struct build *b, const char *dir, const char *name, uint32_t prog)
{
	if (b->files_known) {   /* counted only */
		b->nfiles++;
		return 0;
	}
	if (grow_arr((void **)&b->files, &b->capfiles, b->nfiles + 1, sizeof(*b->files)))
		return -BTR_ERR_NOMEM;
	b->files[b->nfiles++] = (struct dwl_file){ .dir = dir, .name = name, .prog = prog };
	return 0;
}

/* libdw's Dwarf_Line keeps column in 16 bits, isa and op_index in 8: a
 * value that does not fit makes the CU invalid. */
struct lstate {
	uint64_t addr;
	int64_t line;
	uint32_t file, column, isa, op_index;
};

enum { BAD = -1000 };

/* Runs the line program at @off; its rows and files are appended to @b
 * (and removed again if the program is invalid).  Returns the offset of
 * the next program, 0 at the end of the section, or BAD when the unit
 * length itself is unreadable (the rest of the section is skipped). */
static int64_t run_program(struct build *b, uint64_t off, int *err)
{
	const struct btr_dwline_secs *s = b->s;
	const uint8_t *sec = s->line;
	size_t seclen = s->line_len;
	size_t rows0 = b->nrows, files0 = b->nfiles, seqs0 = b->nseqs;
	*err = 0;
	if (off >= seclen || seclen - off < 4)
		return 0;
	struct cur c = { sec + off, sec + seclen };
	uint64_t ulen = 0;   /* (4 bytes are there: checked above) */
	fixed(&c, 4, &ulen);
	unsigned offsz = 4;
	if (ulen == 0xffffffff) {
		if (fixed(&c, 8, &ulen))
			return BAD;
		offsz = 8;
	} else if (ulen >= 0xfffffff0) {
		return BAD;
	}
	if (ulen > (uint64_t)(c.end - c.p))
		return BAD;
	const uint8_t *uend = c.p + ulen;
	int64_t next = (int64_t)(uend - sec);
	c.end = uend;
	uint64_t v;
	uint32_t prog = b->mode == SEQ ? b->seq_prog : (uint32_t)b->nprogs;
	if (fixed(&c, 2, &v))
		return next;
	unsigned version = (unsigned)v;
	if (version < 2 || version > 5)
		return next;
	if (version >= 5) {
		if (c.end - c.p < 2)
			return next;
		if (c.p[0] != s->addr_size || c.p[1] != 0)
			return next;
		c.p += 2;
	}
	uint64_t hlen;
	if (fixed(&c, offsz, &hlen))
		return next;
	const uint8_t *hstart = c.p;
	if (hlen > (uint64_t)(c.end - c.p))
		return next;
	const uint8_t *hend = hstart + hlen;
	if (c.p >= c.end)
		return next;
	unsigned min_len = *c.p++, max_ops = 1;
	if (version >= 4) {
		if (c.p >= c.end || (max_ops = *c.p++) == 0)
			return next;
	}
	if (c.end - c.p < 4)
		return next;
	unsigned default_stmt = *c.p++;
	(void)default_stmt;
	int line_base = (int8_t)*c.p++;
	unsigned line_range = *c.p++, opcode_base = *c.p++;
	if (opcode_base == 0 || c.end - c.p < (ptrdiff_t)opcode_base - 1)
		return next;
	const uint8_t *std_lens = c.p - 1;   /* [k]: operands of standard opcode k */
	const uint8_t *std_end = c.p + opcode_base - 1;
	c.p = std_end;
#define STDLEN(k) ((k) > 0 && (k) < opcode_base ? (int)std_lens[k] : \
		   (std_lens + (k) < uend ? (int)std_lens[k] : -1))

	/* directories and files */
	if (hend < c.p)
		return next;
	struct cur h = { c.p, hend };
	size_t ndirs = 0;
	if (b->files_known) {   /* read at an earlier sequence: not again */
		b->nfiles = b->known_nfiles;
		goto program;
	}
	if (grow_arr((void **)&b->dirs, &b->capdirs, 8, sizeof(*b->dirs)))
		goto nomem;
	if (version < 5) {
		b->dirs[ndirs++] = NULL;   /* comp_dir, resolved at path building */
		while (h.p < h.end && *h.p) {
			const uint8_t *z = memchr(h.p, 0, (size_t)(h.end - h.p));
			if (!z)
				goto out;
			if (grow_arr((void **)&b->dirs, &b->capdirs, ndirs + 1, sizeof(*b->dirs)))
				goto nomem;
			b->dirs[ndirs++] = (const char *)h.p;
			h.p = z + 1;
		}
		if (h.p >= h.end)
			goto out;
		h.p++;
		if (add_file(b, NULL, "???", prog))
			goto nomem;
		if (h.p >= h.end)
			goto out;
		while (h.p < h.end && *h.p) {
			const uint8_t *z = memchr(h.p, 0, (size_t)(h.end - h.p));
			if (!z)
				goto out;
			const char *name = (const char *)h.p;
			h.p = z + 1;
			if (h.p >= h.end)
				goto out;
			uint64_t di = uleb(&h);
			if (di >= ndirs)
				goto out;
			if (h.p >= h.end)
				goto out;
			uleb(&h);
			if (h.p >= h.end)
				goto out;
			uleb(&h);
			if (add_file(b, b->dirs[di], name, prog))
				goto nomem;
			if (di == 0 && name[0] != '/')
				b->files[b->nfiles - 1].dir = NULL;
		}
		if (h.p >= h.end)
			goto out;
		h.p++;
	} else {
		for (int pass = 0; pass < 2; pass++) {
			uint16_t forms[256];
			int form_path = -1, form_idx = -1;
			if (h.p >= h.end)
				goto out;
			unsigned nforms = *h.p++;
			for (unsigned i = 0; i < nforms; i++) {
				if (h.p >= h.end)
					goto out;
				uint16_t desc = (uint16_t)uleb(&h);
				if (h.p >= h.end)
					goto out;
				forms[i] = (uint16_t)uleb(&h);
				if (desc == DW_LNCT_path)
					form_path = (int)i;
				else if (desc == DW_LNCT_directory_index && pass == 1)
					form_idx = (int)i;
			}
			if (nforms && (form_path < 0 || (pass == 1 && form_idx < 0)))
				goto out;
			if (h.p >= h.end)
				goto out;
			uint64_t n = uleb(&h);
			if (!nforms && n)
				goto out;
			if (nforms && n > (uint64_t)(h.end - h.p) / nforms)
				goto out;
			if (pass == 0) {
				if (grow_arr((void **)&b->dirs, &b->capdirs, n, sizeof(*b->dirs)))
					goto nomem;
			} else if (!n && add_file(b, NULL, "???", prog)) {
				goto nomem;
			}
			for (uint64_t k = 0; k < n; k++) {
				const char *name = NULL;
				uint64_t di = UINT64_MAX;
				for (unsigned m = 0; m < nforms; m++) {
					const char *sv;
					uint64_t uv;
					int rc = btr__dwarf_form(&h, forms[m], offsz, s->addr_size, s,
							   (int)m == form_path, &sv, &uv, 0);
					if (rc == FORM_ALT) {
						b->alt = 1;
						goto out;
					}
					if (rc)
						goto out;
					if ((int)m == form_path)
						name = sv;
					else if ((int)m == form_idx) {
						switch (forms[m]) {
						case DW_FORM_data1: case DW_FORM_data2: case DW_FORM_data4:
						case DW_FORM_data8: case DW_FORM_udata: case DW_FORM_sdata:
							di = uv;
							break;
						default:
							goto out;
						}
					}
				}
				if (!name)
					goto out;
				if (pass == 0) {
					b->dirs[ndirs++] = name;
					continue;
				}
				if (di == UINT64_MAX || di >= ndirs)
					goto out;
				if (add_file(b, b->dirs[di], name, prog))
					goto nomem;
			}
		}
	}
	if (h.p != hend && !(h.p == hend - 4))
		goto out;

program:;
	/* the line program: rows keep the program's file number until the
	 * end, when files defined by DW_LNE_define_file are known too (libdw
	 * appends them after the header's). */
	struct lstate st = { .file = 1, .line = 1 };
	c.p = hend;
	if (b->mode == SEQ) {
		if (b->seq_off < (uint64_t)(hend - sec) || b->seq_off >= (uint64_t)(uend - sec))
			goto out;
		c.p = sec + b->seq_off;
	}
	struct seqtrack sq = { .start = (uint64_t)(c.p - sec), .mono = 1 };
#define NEW_ROW(endseq)                                                                  \
	do {                                                                             \
		if (st.line < INT_MIN || st.line > INT_MAX || st.column > 0xffff ||     \
		    st.isa > 0xff || st.op_index > 0xff)                                 \
			goto out;                                                        \
		if (b->mode == INDEX) {                                                  \
			if (index_row(b, &sq, prog, st.addr, endseq, (uint64_t)(c.p - sec))) \
				goto nomem;                                              \
			break;                                                           \
		}                                                                        \
		if (grow_arr((void **)&b->rows, &b->caprows, b->nrows + 1, sizeof(*b->rows))) \
			goto nomem;                                                      \
		b->rows[b->nrows++] = (struct dwl_row){                                  \
			.addr = st.addr, .line = (int32_t)st.line,                        \
			.file = (st.file < END_BIT ? st.file : END_BIT - 1) |             \
				((endseq) ? END_BIT : 0) };                               \
	} while (0)
	while (c.p < c.end) {
		unsigned op = *c.p++;
		if (op >= opcode_base) {
			if (line_range == 0)
				goto out;
			st.line += line_base + (int)((op - opcode_base) % line_range);
			uint32_t adv = (op - opcode_base) / line_range;
			st.addr += (uint32_t)(min_len * ((st.op_index + adv) / max_ops));
			st.op_index = (st.op_index + adv) % max_ops;
			NEW_ROW(0);
		} else if (op == 0) {
			if (c.end - c.p < 2)
				goto out;
			unsigned len = *c.p++;
			if ((size_t)(c.end - c.p) < len)
				goto out;
			unsigned sub = *c.p++;
			switch (sub) {
			case DW_LNE_end_sequence:
				NEW_ROW(1);
				st = (struct lstate){ .file = 1, .line = 1 };
				if (b->mode == SEQ)
					goto seq_end;
				break;
			case DW_LNE_set_address:
				st.op_index = 0;
				if (fixed(&c, s->addr_size, &st.addr))
					goto out;
				break;
			case DW_LNE_define_file: {
				const uint8_t *z = memchr(c.p, 0, (size_t)(c.end - c.p));
				if (!z)
					goto out;
				const char *name = (const char *)c.p;
				c.p = z + 1;
				if (c.p >= c.end)
					goto out;
				uint64_t di = (uint32_t)uleb(&c);
				if (di >= ndirs || c.p >= c.end)
					goto out;
				uleb(&c);
				if (c.p >= c.end)
					goto out;
				uleb(&c);
				if (add_file(b, name[0] == '/' ? NULL : b->dirs[di], name, prog))
					goto nomem;
				b->complex = 1;   /* a file table changing mid-program */
				break;
			}
			case DW_LNE_set_discriminator:
				if (STDLEN(4) != 1 || c.p >= c.end)
					goto out;
				uleb(&c);
				break;
			default:
				if ((size_t)(c.end - (c.p - 1)) < len)
					goto out;
				c.p += (ptrdiff_t)len - 1;
				break;
			}
		} else if (op <= DW_LNS_set_isa) {
			int need = (op == DW_LNS_advance_pc || op == DW_LNS_advance_line ||
				    op == DW_LNS_set_file || op == DW_LNS_set_column ||
				    op == DW_LNS_fixed_advance_pc || op == DW_LNS_set_isa);
			if (STDLEN(op) != need)
				goto out;
			switch (op) {
			case DW_LNS_copy:
				NEW_ROW(0);
				break;
			case DW_LNS_advance_pc: {
				if (c.p >= c.end)
					goto out;
				uint32_t adv = (uint32_t)uleb(&c);
				st.addr += (uint32_t)(min_len * ((st.op_index + adv) / max_ops));
				st.op_index = (st.op_index + adv) % max_ops;
				break;
			}
			case DW_LNS_advance_line:
				if (c.p >= c.end)
					goto out;
				st.line += (int32_t)sleb(&c);
				break;
			case DW_LNS_set_file:
				if (c.p >= c.end)
					goto out;
				st.file = (uint32_t)uleb(&c);
				break;
			case DW_LNS_set_column:
				if (c.p >= c.end)
					goto out;
				st.column = (uint32_t)uleb(&c);
				break;
			case DW_LNS_const_add_pc: {
				if (line_range == 0)
					goto out;
				uint32_t adv = (255 - opcode_base) / line_range;
				st.addr += (uint32_t)(min_len * ((st.op_index + adv) / max_ops));
				st.op_index = (st.op_index + adv) % max_ops;
				break;
			}
			case DW_LNS_fixed_advance_pc:
				if (fixed(&c, 2, &v))
					goto out;
				st.addr += v;
				st.op_index = 0;
				break;
			case DW_LNS_set_isa:
				if (c.p >= c.end)
					goto out;
				st.isa = (uint32_t)uleb(&c);
				break;
			default:   /* negate_stmt, basic_block, prologue_end, epilogue_begin */
				break;
			}
		} else {
			int n = STDLEN(op);
			if (n < 0)
				goto out;
			for (; n > 0; n--) {
				if (c.p >= c.end)
					goto out;
				uleb(&c);
			}
		}
	}
	if (b->mode == SEQ)   /* no end of sequence: not the indexed one */
		goto out;
	if (b->mode == INDEX) {
		if (sq.nrows)   /* rows after the last end of sequence */
			b->complex = 1;
		if (b->nseqs == seqs0)
			goto out;
		b->nfiles = files0;
		size_t top = seqs0;   /* the greatest row: at the greatest end */
		for (size_t i = seqs0 + 1; i < b->nseqs; i++)
			if (b->seqs[i].hi > b->seqs[top].hi ||
			    (b->seqs[i].hi == b->seqs[top].hi && (b->seqs[i].flags & SEQ_TAIL)))
				top = i;
		b->seqs[top].flags |= SEQ_TOP;
		goto add_prog;
	}
seq_end:
	if (b->nrows == rows0)
		goto out;
	/* file numbers to table indices; out of range: the sentinel (no file) */
	size_t nfiles = b->nfiles - files0, base = b->files_known ? b->files_base : files0;
	if (add_file(b, NULL, NULL, prog))
		goto nomem;
	for (size_t i = rows0; i < b->nrows; i++) {
		uint32_t f = b->rows[i].file & ~END_BIT;
		b->rows[i].file = (b->rows[i].file & END_BIT) |
				  (uint32_t)(base + (f < nfiles ? f : nfiles));
	}
	if (b->nfiles >= LAST_BIT || base + nfiles >= LAST_BIT)
		goto out;
	if (b->mode == SEQ)
		return next;
	/* libdw marks the last row of each CU's sorted table an end of
	 * sequence ("some compilers forget"): find it now (the greatest by
	 * key, then by order), mark it after sorting */
	size_t lastrow = rows0, nruns0 = b->nruns;
	for (size_t i = rows0; i < b->nrows;) {
		/* a run ends with its sequence: sequences of discarded code (at
		 * 0) must not join the real ones after them */
		size_t j = i + 1;
		while (j < b->nrows && !(b->rows[j - 1].file & END_BIT) &&
		       key_cmp(&b->rows[j - 1], &b->rows[j]) <= 0)
			j++;
		if (key_cmp(&b->rows[j - 1], &b->rows[lastrow]) >= 0)
			lastrow = j - 1;
		if (grow_arr((void **)&b->runs, &b->capruns, b->nruns + 1, sizeof(*b->runs))) {
			b->nruns = nruns0;
			goto nomem;
		}
		b->runs[b->nruns++] = (struct run){ i, j - i, b->rows[i].addr,
						    !!(b->rows[i].file & END_BIT) };
		i = j;
	}
	b->rows[lastrow].file |= LAST_BIT;
add_prog:
	if (grow_arr((void **)&b->progs, &b->capprogs, b->nprogs + 1, sizeof(*b->progs)))
		goto nomem;
	b->progs[b->nprogs++] = (struct dwl_prog){ .off = off, .version = (uint16_t)version };
	return next;
out:
	b->nrows = rows0;
	b->nfiles = files0;
	b->nseqs = seqs0;
	return next;
nomem:
	*err = -BTR_ERR_NOMEM;
	b->nrows = rows0;
	b->nfiles = files0;
	b->nseqs = seqs0;
	return BAD;
#undef NEW_ROW
#undef STDLEN
}

/* ---- DW_AT_comp_dir of DWARF 2-4 line tables ------------------------ */

/* btr__dwarf_comp_dirs: the comp_dir of the DWARF 2-4 program at
 * @stmt_list (programs are in section order). */
static void set_comp_dir(void *ctx, uint64_t stmt, const char *dir)
{
	struct build *b = ctx;
	size_t lo = 0, hi = b->nprogs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (b->progs[mid].off < stmt)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < b->nprogs && b->progs[lo].off == stmt && b->progs[lo].version < 5)
		b->progs[lo].comp_dir = dir;
}

/* ---- sorting -------------------------------------------------------- */

/* (address, end of sequence first): libdw's compare_lines without its
 * last key, the order the rows were made in. */
static int key_cmp(const struct dwl_row *a, const struct dwl_row *b)
{
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	int ea = !!(a->file & END_BIT), eb = !!(b->file & END_BIT);
	return ea == eb ? 0 : ea ? -1 : 1;
}

static int run_cmp(const void *x, const void *y)
{
	const struct run *a = x, *b = y;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->end != b->end)
		return a->end ? -1 : 1;
	return a->start < b->start ? -1 : 1;
}

struct grow {
	struct dwl_row r;
	size_t gen;
};

static int grow_cmp(const void *x, const void *y)
{
	const struct grow *a = x, *b = y;
	int k = key_cmp(&a->r, &b->r);
	return k ? k : a->gen < b->gen ? -1 : 1;
}

static int gen_cmp(const struct dwl_row *a, size_t ga, const struct dwl_row *b, size_t gb)
{
	int k = key_cmp(a, b);
	return k ? k : ga < gb ? -1 : ga > gb;
}

/* Sorts @rows by (key, index).  Sequences are sorted runs, mostly apart
 * from each other: the runs are ordered by their first rows and copied;
 * only where runs overlap (rows of discarded sections, all at address 0)
 * is that group of runs sorted row by row. */
static int sort_rows(struct dwl_row **rowsp, size_t n, struct run *runs, size_t nruns)
{
	struct dwl_row *rows = *rowsp;
	if (nruns <= 1)
		return 0;
	qsort(runs, nruns, sizeof(*runs), run_cmp);
	struct dwl_row *out = malloc(n * sizeof(*out));
	struct grow *g = NULL;
	size_t capg = 0;
	if (!out)
		return -BTR_ERR_NOMEM;
	size_t o = 0;
	for (size_t k = 0; k < nruns;) {
		/* the group of runs from k that overlap: each starts before the
		 * greatest last row of those before it */
		size_t e = k + 1, cnt = runs[k].len;
		size_t mx = runs[k].start + runs[k].len - 1;   /* generation index */
		while (e < nruns && gen_cmp(&rows[runs[e].start], runs[e].start, &rows[mx], mx) < 0) {
			size_t last = runs[e].start + runs[e].len - 1;
			if (gen_cmp(&rows[last], last, &rows[mx], mx) > 0)
				mx = last;
			cnt += runs[e].len;
			e++;
		}
		if (e == k + 1) {
			memcpy(out + o, rows + runs[k].start, runs[k].len * sizeof(*out));
			o += runs[k].len;
			k++;
			continue;
		}
		if (grow_arr((void **)&g, &capg, cnt, sizeof(*g))) {
			free(g);
			free(out);
			return -BTR_ERR_NOMEM;
		}
		size_t m = 0;
		for (size_t r = k; r < e; r++)
			for (size_t j = 0; j < runs[r].len; j++)
				g[m++] = (struct grow){ rows[runs[r].start + j], runs[r].start + j };
		qsort(g, m, sizeof(*g), grow_cmp);
		for (size_t j = 0; j < m; j++)
			out[o++] = g[j].r;
		k = e;
	}
	free(g);
	free(rows);
	*rowsp = out;
	return 0;
}

/* ---- the table ------------------------------------------------------ */

static int seq_cmp(const void *x, const void *y)
{
	const struct dwl_seq *a = x, *b = y;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

/* Runs every line program of @b.  INDEX: then sorts the sequences and
 * says whether they are apart (each ends at or before the next starts;
 * with rows at its end, where the next starts only if made before it, so
 * that the next one's rows there sort last): only then does a lookup in
 * one sequence's rows answer as the sorted table of all rows would. */
static int run_all(struct build *b)
{
	int err = 0;
	for (uint64_t off = 0;;) {
		int64_t next = run_program(b, off, &err);
		if (err || next <= 0 || (uint64_t)next <= off)
			break;
		off = (uint64_t)next;
	}
	if (err || b->mode != INDEX || b->complex)
		return err;
	if (b->nseqs > 1)
		qsort(b->seqs, b->nseqs, sizeof(*b->seqs), seq_cmp);
	for (size_t i = 1; i < b->nseqs && !b->complex; i++)
		b->complex = b->seqs[i - 1].hi > b->seqs[i].lo ||
			     ((b->seqs[i - 1].flags & SEQ_TAIL) && b->seqs[i - 1].hi == b->seqs[i].lo &&
			      b->seqs[i - 1].off > b->seqs[i].off);
	return 0;
}

int btr__dwline_build(const struct btr_dwline_secs *s, unsigned flags, struct btr_dwline **out)
{
	if (!s || !out || !s->line || (s->addr_size != 4 && s->addr_size != 8))
		return -BTR_ERR_INVAL;
	struct build b = { .s = s, .mode = (flags & BTR_DWLINE_FULL) ? FULL : INDEX };
	int err = run_all(&b);
	if (!err && b.mode == INDEX && b.complex && !b.alt) {
		/* sequences overlap (or go down): every row, sorted */
		free(b.seqs);
		free(b.progs);
		b = (struct build){ .s = s, .mode = FULL, .files = b.files, .capfiles = b.capfiles,
				    .dirs = b.dirs, .capdirs = b.capdirs };
		err = run_all(&b);
	}
	if (!err && b.alt)
		err = -BTR_ERR_UNSUPPORTED;
	if (!err && !(b.mode == INDEX ? b.nseqs : b.nrows))
		err = -BTR_ERR_NO_DEBUGINFO;
	if (!err && b.mode == FULL)
		err = sort_rows(&b.rows, b.nrows, b.runs, b.nruns);
	free(b.runs);
	struct btr_dwline *t = NULL;
	if (!err && !(t = calloc(1, sizeof(*t))))
		err = -BTR_ERR_NOMEM;
	if (err) {
		free(b.rows);
		free(b.files);
		free(b.progs);
		free(b.seqs);
		free(b.dirs);
		return err;
	}
	btr__dwarf_comp_dirs(s, set_comp_dir, &b);
	t->rows = b.rows;
	t->nrows = b.nrows;
	t->seqs = b.seqs;
	t->nseqs = b.nseqs;
	t->secs = *s;
	t->files = b.files;
	t->nfiles = b.nfiles;
	t->capfiles = b.capfiles;
	t->dirs = b.dirs;
	t->capdirs = b.capdirs;
	t->progs = b.progs;
	t->nprogs = b.nprogs;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void btr__dwline_free(struct btr_dwline *t)
{
	if (!t)
		return;
	while (t->pblocks) {
		struct pblock *b = t->pblocks;
		t->pblocks = b->prev;
		free(b);
	}
	free(t->rows);
	free(t->seqs);
	free(t->scratch);
	free(t->dirs);
	free(t->files);
	free(t->progs);
	for (size_t i = 0; i < sizeof(t->bufs) / sizeof(t->bufs[0]); i++)
		free(t->bufs[i]);
	if (t->elf)
		elf_end(t->elf);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int btr__dwline_lazy(const struct btr_dwline *t)
{
	return t && t->seqs;
}

size_t btr__dwline_rows(const struct btr_dwline *t)
{
	return t ? t->nrows : 0;
}

uint64_t btr__dwline_row_addr(const struct btr_dwline *t, size_t i, int *end_seq)
{
	if (end_seq)
		*end_seq = !!(t->rows[i].file & ENDS);
	return t->rows[i].addr;
}

/* The rows of sequence @q of a lazy table, decoded at first use (the
 * program run again from the sequence's first opcode; its file table read
 * at the first of its sequences).  Called with the lock held. */
static int seq_rows(struct btr_dwline *t, struct dwl_seq *q)
{
	if (q->rows)
		return 0;
	struct dwl_prog *p = &t->progs[q->prog];
	int known = p->nfiles != 0;
	struct build b = { .s = &t->secs, .mode = SEQ, .seq_off = q->off, .seq_prog = q->prog,
			   .files_known = known, .files_base = p->files0,
			   .known_nfiles = known ? p->nfiles - 1 : 0,
			   .rows = t->scratch, .caprows = t->capscratch,
			   .files = t->files, .nfiles = known ? 0 : t->nfiles, .capfiles = t->capfiles,
			   .dirs = t->dirs, .capdirs = t->capdirs };
	int err = 0;
	run_program(&b, p->off, &err);
	t->scratch = b.rows;
	t->capscratch = b.caprows;
	t->dirs = b.dirs;
	t->capdirs = b.capdirs;
	if (!known) {
		t->files = b.files;
		t->capfiles = b.capfiles;
	}
	if (err)
		return err;
	if (b.nrows != q->nrows)   /* the index ran the same opcodes */
		return -BTR_ERR_INTERNAL;
	if (!known) {
		p->files0 = (uint32_t)t->nfiles;
		p->nfiles = (uint32_t)(b.nfiles - t->nfiles);
		t->nfiles = b.nfiles;
	}
	struct dwl_row *r = blk_alloc(t, b.nrows * sizeof(*r));
	if (!r)
		return -BTR_ERR_NOMEM;
	memcpy(r, b.rows, b.nrows * sizeof(*r));
	if ((q->flags & (SEQ_TAIL | SEQ_TOP)) == (SEQ_TAIL | SEQ_TOP) && b.nrows >= 2)
		r[b.nrows - 2].file |= LAST_BIT;
	q->rows = r;
	return 0;
}

/* The full path of file @fi as libdw builds it: an absolute name as is,
 * else joined with its directory ("dir/name"); before DWARF 5 directory 0
 * is the CU's comp_dir, and without one the name stays relative.  Called
 * with the lock held. */
static const char *file_path(struct btr_dwline *t, uint32_t fi, int *nomem)
{
	struct dwl_file *f = &t->files[fi];
	if (!f->name)
		return NULL;
	if (f->path)
		return f->path;
	const char *dir = f->dir;
	if (!dir && t->progs[f->prog].version < 5)
		dir = t->progs[f->prog].comp_dir;
	if (f->name[0] == '/' || !dir)
		return f->name;
	size_t dl = strlen(dir), nl = strlen(f->name);
	char *np = blk_alloc(t, dl + nl + 2);
	if (!np) {
		*nomem = 1;
		return NULL;
	}
	memcpy(np, dir, dl);
	np[dl] = '/';
	memcpy(np + dl + 1, f->name, nl + 1);
	f->path = np;
	return np;
}

/* Index of the first of @n rows with address > @addr. */
static size_t upper(const struct dwl_row *rows, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rows[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of the first sequence with lo > @addr. */
static size_t seq_upper(const struct btr_dwline *t, uint64_t addr)
{
	size_t lo = 0, hi = t->nseqs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->seqs[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The row for @addr (lock held): NULL when none, *@err set on failure. */
static const struct dwl_row *row_at(struct btr_dwline *t, uint64_t addr, int *err)
{
	if (!t->seqs) {
		size_t i = upper(t->rows, t->nrows, addr);
		return i ? &t->rows[i - 1] : NULL;
	}
	size_t k = seq_upper(t, addr);
	if (!k)
		return NULL;   /* before every sequence */
	struct dwl_seq *q = &t->seqs[k - 1];
	if (addr >= q->hi && !(q->flags & SEQ_TAIL))
		return NULL;   /* at an end, in the gap after it */
	if ((*err = seq_rows(t, q)) != 0)
		return NULL;
	if (addr >= q->hi)   /* the last row at the end, after the end */
		return &q->rows[q->nrows - 2];
	return &q->rows[upper(q->rows, q->nrows, addr) - 1];   /* q->rows[0] is at lo */
}

int btr__dwline_find(struct btr_dwline *t, uint64_t addr, const char **file, int *line)
{
	if (!t || !file || !line)
		return -BTR_ERR_INVAL;
	int err = 0, nomem = 0;
	pthread_mutex_lock(&t->lock);
	const struct dwl_row *r = row_at(t, addr, &err);
	const char *f = NULL;
	if (r && !(r->file & ENDS) && r->line > 0)
		f = file_path(t, FILE_OF(r), &nomem);
	pthread_mutex_unlock(&t->lock);
	if (err)
		return err;
	if (!f)
		return nomem ? -BTR_ERR_NOMEM : -BTR_ERR_NOT_FOUND;
	*file = f;
	*line = r->line;
	return 0;
}

struct pick {
	const struct dwl_row *row;
	uint32_t prog;
	const char *path;
};

/* Orders the @n picks (in address order) program by program, each
 * program's in address order: a stable counting sort on the program (a
 * whole module's rows are hundreds of thousands, its programs thousands).
 * Returns 0 or -BTR_ERR_NOMEM. */
static int by_program(struct pick *pk, size_t n)
{
	size_t nprogs = 0;
	for (size_t i = 0; i < n; i++)
		if (pk[i].prog >= nprogs)
			nprogs = (size_t)pk[i].prog + 1;
	size_t *at = calloc(nprogs + 1, sizeof(*at));
	struct pick *tmp = malloc(n * sizeof(*tmp));
	if (!at || !tmp) {
		free(at);
		free(tmp);
		return -BTR_ERR_NOMEM;
	}
	for (size_t i = 0; i < n; i++)
		at[pk[i].prog + 1]++;
	for (size_t k = 0; k < nprogs; k++)
		at[k + 1] += at[k];
	for (size_t i = 0; i < n; i++)
		tmp[at[pk[i].prog]++] = pk[i];
	memcpy(pk, tmp, n * sizeof(*pk));
	free(tmp);
	free(at);
	return 0;
}

/* The rows of [@lo, @hi) in address order (lock held): of a full table, a
 * stretch of its rows; of a lazy one, the rows of the sequences met,
 * decoded first.  *@pk (NULL for a full table: rows from *@rows) is owned
 * by the caller. */
static int range_rows(struct btr_dwline *t, uint64_t lo, uint64_t hi, const struct dwl_row **rows,
		      struct pick **pk, size_t *n)
{
	*pk = NULL;
	*n = 0;
	if (!t->seqs) {
		size_t a = lo ? upper(t->rows, t->nrows, lo - 1) : 0;
		size_t z = hi ? upper(t->rows, t->nrows, hi - 1) : 0;
		*rows = t->rows + a;
		*n = a < z ? z - a : 0;
		return 0;
	}
	/* sequences are apart and sorted: their ends are sorted too (the
	 * first one met may end at @lo, with rows there) */
	size_t k0 = 0, k1 = t->nseqs;
	while (k0 < k1) {
		size_t mid = k0 + (k1 - k0) / 2;
		if (t->seqs[mid].hi < lo)
			k0 = mid + 1;
		else
			k1 = mid;
	}
	size_t cnt = 0, k;
	for (k = k0; k < t->nseqs && hi && t->seqs[k].lo <= hi - 1; k++) {
		int err = seq_rows(t, &t->seqs[k]);
		if (err)
			return err;
		cnt += t->seqs[k].nrows;
	}
	if (!cnt)
		return 0;
	if (!(*pk = malloc(cnt * sizeof(**pk))))
		return -BTR_ERR_NOMEM;
	size_t m = 0;
	for (size_t j = k0; j < k; j++) {
		const struct dwl_seq *q = &t->seqs[j];
		for (size_t i = 0; i < q->nrows; i++)
			if (q->rows[i].addr >= lo && q->rows[i].addr <= hi - 1)
				(*pk)[m++] = (struct pick){ &q->rows[i], q->prog, NULL };
	}
	*n = m;
	return 0;
}

int btr__dwline_foreach(struct btr_dwline *t, uint64_t lo, uint64_t hi,
			int (*cb)(void *ctx, uint64_t addr, const char *file, int line), void *ctx)
{
	if (!t || !cb)
		return -BTR_ERR_INVAL;
	pthread_mutex_lock(&t->lock);
	const struct dwl_row *rows = NULL;
	struct pick *pk;
	size_t n;
	int err = range_rows(t, lo, hi, &rows, &pk, &n);
	if (err || !n) {
		pthread_mutex_unlock(&t->lock);
		free(pk);
		return err;
	}
#define ROW(i) (pk ? pk[i].row : &rows[i])
	/* one program covers the range (the usual case): its rows in order;
	 * else program by program, as libdw walks CU after CU */
	uint32_t p0 = t->files[FILE_OF(ROW(0))].prog;
	int mixed = 0;
	for (size_t i = 1; i < n && !mixed; i++)
		mixed = t->files[FILE_OF(ROW(i))].prog != p0;
	if (mixed && !pk) {
		if (!(pk = malloc(n * sizeof(*pk)))) {
			pthread_mutex_unlock(&t->lock);
			return -BTR_ERR_NOMEM;
		}
		for (size_t i = 0; i < n; i++)
			pk[i] = (struct pick){ &rows[i], t->files[FILE_OF(&rows[i])].prog, NULL };
	}
	if (mixed && (err = by_program(pk, n)) < 0) {
		pthread_mutex_unlock(&t->lock);
		free(pk);
		return err;
	}
	/* every path first: running out of memory is said before any row */
	int nomem = 0;
	for (size_t i = 0; i < n && !nomem; i++) {
		const char *f = file_path(t, FILE_OF(ROW(i)), &nomem);
		if (pk)
			pk[i].path = f;
	}
	pthread_mutex_unlock(&t->lock);
	if (nomem) {
		free(pk);
		return -BTR_ERR_NOMEM;
	}
	/* @cb runs unlocked (it may look lines up).  Rows and paths never
	 * move; the files of a lazy table may (another thread decoding), so
	 * its paths were taken above; a full table's files stay, with every
	 * path built: file_path only reads. */
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct dwl_row *r = ROW(i);
		if ((r->file & ENDS) || r->line <= 0)
			continue;
		const char *f = pk ? pk[i].path : file_path(t, FILE_OF(r), &nomem);
		if (f)
			rc = cb(ctx, r->addr, f, r->line);
	}
#undef ROW
	free(pk);
	return rc;
}

/* ---- from an ELF file ----------------------------------------------- */

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2
#endif

/* The bytes of section @name of @elf (inflated into *@buf if compressed),
 * or NULL in *@data when absent.  Returns 0 or a negative btr_error. */
static int section_bytes(Elf *elf, const char *name, const uint8_t **data, size_t *len, void **buf)
{
	GElf_Shdr sh;
	*data = NULL;
	*len = 0;
	*buf = NULL;
	Elf_Scn *scn = btr__elf_find_scn(elf, name, &sh);
	if (!scn || sh.sh_type == SHT_NOBITS || !sh.sh_size)
		return 0;
	Elf_Data *d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf)
		return -BTR_ERR_BAD_ELF;
	if (!(sh.sh_flags & SHF_COMPRESSED)) {
		*data = d->d_buf;
		*len = d->d_size;
		return 0;
	}
	GElf_Chdr ch;
	size_t hsz = gelf_fsize(elf, ELF_T_CHDR, 1, EV_CURRENT);
	if (!gelf_getchdr(scn, &ch) || !hsz || d->d_size < hsz || ch.ch_size > ((size_t)1 << 34))
		return -BTR_ERR_BAD_ELF;
	uint8_t *out = malloc(ch.ch_size ? ch.ch_size : 1);
	if (!out)
		return -BTR_ERR_NOMEM;
	const uint8_t *src = (const uint8_t *)d->d_buf + hsz;
	size_t srclen = d->d_size - hsz;
	int ok = 0;
	if (ch.ch_type == ELFCOMPRESS_ZLIB) {
		uLongf dl = (uLongf)ch.ch_size;
		ok = uncompress(out, &dl, src, (uLong)srclen) == Z_OK && dl == ch.ch_size;
	} else if (ch.ch_type == ELFCOMPRESS_ZSTD) {
		size_t r = ZSTD_decompress(out, ch.ch_size, src, srclen);
		ok = !ZSTD_isError(r) && r == ch.ch_size;
	} else {
		free(out);
		return -BTR_ERR_UNSUPPORTED;
	}
	if (!ok) {
		free(out);
		return -BTR_ERR_COMPRESS;
	}
	*data = out;
	*len = ch.ch_size;
	*buf = out;
	return 0;
}

/* Whether a line program of @line (bytes) is of DWARF 2-4 (then the CU
 * DIEs are read for DW_AT_comp_dir). */
static int has_old_programs(const uint8_t *line, size_t len)
{
	struct cur c = { line, line + len };
	while (c.end - c.p >= 6) {
		uint64_t ulen, v;
		fixed(&c, 4, &ulen);
		if (ulen == 0xffffffff && fixed(&c, 8, &ulen))
			return 0;
		if (ulen > (uint64_t)(c.end - c.p) || ulen < 2)
			return 0;
		v = rd(c.p, 2);
		if (v >= 2 && v < 5)
			return 1;
		c.p += ulen;
	}
	return 0;
}

int btr__dwline_from_elf(Elf *elf, unsigned flags, struct btr_dwline **out)
{
	struct btr_dwline_secs s = { 0 };
	void *bufs[5] = { 0 };
	int err;
	GElf_Ehdr eh;
	if (!elf || !out || !gelf_getehdr(elf, &eh)) {
		err = -BTR_ERR_INVAL;
		goto fail;
	}
	s.addr_size = eh.e_ident[EI_CLASS] == ELFCLASS32 ? 4 : 8;
	if ((err = section_bytes(elf, ".debug_line", &s.line, &s.line_len, &bufs[0])) != 0)
		goto fail;
	if (!s.line) {
		err = -BTR_ERR_NO_DEBUGINFO;
		goto fail;
	}
	if ((err = section_bytes(elf, ".debug_line_str", &s.line_str, &s.line_str_len, &bufs[1])) ||
	    (err = section_bytes(elf, ".debug_str", &s.str, &s.str_len, &bufs[2])))
		goto fail;
	if (has_old_programs(s.line, s.line_len) &&
	    ((err = section_bytes(elf, ".debug_info", &s.info, &s.info_len, &bufs[3])) ||
	     (err = section_bytes(elf, ".debug_abbrev", &s.abbrev, &s.abbrev_len, &bufs[4]))))
		goto fail;
	struct btr_dwline *t;
	if ((err = btr__dwline_build(&s, flags, &t)) != 0)
		goto fail;
	/* the abbreviations were needed only while building (a comp_dir of
	 * DW_FORM_string points into .debug_info, which stays) */
	free(bufs[4]);
	bufs[4] = NULL;
	t->secs.abbrev = NULL;
	t->secs.abbrev_len = 0;
	memcpy(t->bufs, bufs, sizeof(bufs));
	t->elf = elf;
	*out = t;
	return 0;
fail:
	for (int i = 0; i < 5; i++)
		free(bufs[i]);
	if (elf)
		elf_end(elf);
	return err;
}
