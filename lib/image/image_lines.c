/* image_lines.c - source lines of image addresses (btr_image_line,
 * btr_image_foreach_line): btr's own line tables (lib/elf/dwarf_line.c) of a
 * module's file or separate debug file, else elfutils' libdwfl.  Split
 * from image.c, which it calls (modules, lazy loading), never the other
 * way. */
#include "btr/image.h"
#include "elf/dwarf_line.h"
#include "elf/elf_priv.h"
#include "image_priv.h"
#include "internal.h"

#include <elfutils/libdwfl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The Dwfl callbacks of an image: elfutils' standard search for separate
 * debug info (.gnu_debuglink next to the file, build-id under absolute
 * path entries), with the image's debug directories as the path. */
static const Dwfl_Callbacks *dwfl_callbacks(struct modfile *f)
{
	f->dwfl_cb = (Dwfl_Callbacks){
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.section_address = dwfl_offline_section_address,
		.debuginfo_path = &f->dwfl_path,  /* NULL string: the default */
	};
	return &f->dwfl_cb;
}

/* libdwfl asks debuginfod last, which reads DEBUGINFOD_URLS: unset or
 * empty, it looks nowhere (not even in its cache). */
static int debuginfod_set(void)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	return urls && *urls;
}

/* One Dwfl per module, created at the first line lookup that the own
 * line table cannot answer: most modules of a process (libc, ld.so) are
 * never asked for lines, and DWARF is costly.  Not when the own search
 * found no DWARF at all: it looked wherever libdwfl looks (the file, its
 * build-id and its .gnu_debuglink in the debug directories), and libdwfl
 * would only dlopen libdebuginfod (and curl, krb5, gnutls...) to ask it
 * nothing. */
static int load_dwarf_locked(struct modfile *m)
{
	if (m->dw_state != LAZY_NONE)
		return m->dw_state == LAZY_OK ? 0 : -BTR_ERR_NO_DEBUGINFO;
	m->dw_state = LAZY_FAIL;
	if (!m->elf || (m->dwl_state == LAZY_FAIL && m->dwl_err == -BTR_ERR_NO_DEBUGINFO &&
			!m->dwl_ask_libdw && !debuginfod_set()))
		return -BTR_ERR_NO_DEBUGINFO;
	m->dwfl = dwfl_begin(dwfl_callbacks(m));
	if (!m->dwfl)
		return -BTR_ERR_NOMEM;
	dwfl_report_begin(m->dwfl);
	/* add_p_vaddr=true with base 0: the module at its link addresses
	 * (shared by every bias; lookups subtract the module's). */
	m->dwmod = dwfl_report_elf(m->dwfl, m->base_name, m->path, -1, 0, true);
	dwfl_report_end(m->dwfl, NULL, NULL);
	Dwarf_Addr b;
	if (!m->dwmod || !dwfl_module_getdwarf(m->dwmod, &b)) {
		btr_debug("%s: no DWARF (%s)", m->path, dwfl_errmsg(-1));
		return -BTR_ERR_NO_DEBUGINFO;
	}
	__atomic_store_n(&m->dw_state, LAZY_OK, __ATOMIC_RELEASE);
	return 0;
}

/* The own line table of ELF file @path into m->dwl; *@dwarf set if the
 * file has sections libdw reads as DWARF, lines or not. */
static int lines_from(struct modfile *m, const char *path, int *dwarf)
{
	Elf *e;
	int err = btr__elf_open(path, &e);
	if (err)
		return err;
	*dwarf |= btr__elf_has_dwarf(e);
	err = btr__dwline_from_elf(e, 0, &m->dwl);
	if (!err && path != m->path)
		btr_debug("%s: lines from %s", m->path, path);
	return err;
}

/* The module's own line table (lib/elf/dwarf_line.c), built at the first
 * line lookup from .debug_line of the file, else of its separate debug
 * file found by build-id under the debug directories, else by
 * .gnu_debuglink as libdwfl finds it.  Files it cannot read (names in a
 * dwz alt file, .zdebug sections) are left to libdw (load_dwarf). */
static int load_lines_locked(struct modfile *m)
{
	if (m->dwl_state != LAZY_NONE)
		return m->dwl_state == LAZY_OK ? 0 : -BTR_ERR_NO_DEBUGINFO;
	m->dwl_state = LAZY_FAIL;
	if (!m->elf)
		return -BTR_ERR_NO_DEBUGINFO;
	char path[PATH_MAX];
	int dwarf = 0, err = lines_from(m, m->path, &dwarf);
	if (err == -BTR_ERR_NO_DEBUGINFO) {
		uint8_t id[64];
		int n = btr__elf_build_id(m->elf, id, sizeof(id));
		dwarf |= n > (int)sizeof(id);
		if (n > 0 && n <= (int)sizeof(id) &&
		    btr_elf_find_build_id(id, (size_t)n, (const char *const *)m->debug_dirs,
					  m->ndebug_dirs, path, sizeof(path)) == 0) {
			err = lines_from(m, path, &dwarf);
			/* libdwfl takes DIR/.build-id/ of absolute DIRs only, and
			 * may find another file there than a scan of a DIR. */
			dwarf |= path[0] != '/' || !strstr(path, "/.build-id/");
		}
	}
	if (err == -BTR_ERR_NO_DEBUGINFO) {
		int rc = btr__elf_find_debuglink(m->elf, m->path, m->dwfl_path, path, sizeof(path));
		err = rc == 0 ? lines_from(m, path, &dwarf) : rc == -BTR_ERR_NOT_FOUND ? err : rc;
	}
	m->dwl_err = err;
	m->dwl_ask_libdw = dwarf;
	if (err) {
		btr_debug("%s: no own line table (%s)", m->path, btr_errstr(err));
		return err;
	}
	__atomic_store_n(&m->dwl_state, LAZY_OK, __ATOMIC_RELEASE);
	return 0;
}

static int load_lines(struct module *m)
{
	return m->f ? image_lazy_load(m->f, &m->f->dwl_state, load_lines_locked) : -BTR_ERR_NO_DEBUGINFO;
}

static int load_dwarf(struct module *m)
{
	return m->f ? image_lazy_load(m->f, &m->f->dw_state, load_dwarf_locked) : -BTR_ERR_NO_DEBUGINFO;
}

int btr_image_line(struct btr_image *img, uint64_t addr, const char **file, int *line)
{
	if (!img || !file || !line)
		return -BTR_ERR_INVAL;
	struct module *m = image_module_at(img, addr);
	if (!m)
		return -BTR_ERR_NOT_FOUND;
	/* out of memory building the table or a path: libdw, as before */
	if (load_lines(m) == 0) {
		int rc = btr__dwline_find(m->f->dwl, addr - m->bias, file, line);
		if (rc != -BTR_ERR_NOMEM)
			return rc;
	}
	int err = load_dwarf(m);
	if (err)
		return err;
	Dwfl_Line *l = dwfl_module_getsrc(m->f->dwmod, addr - m->bias);
	int ln = 0;
	const char *f = l ? dwfl_lineinfo(l, NULL, &ln, NULL, NULL, NULL) : NULL;
	if (!f || ln <= 0)
		return -BTR_ERR_NOT_FOUND;
	*file = f;
	*line = ln;
	return 0;
}

struct line_shift {
	int (*cb)(void *ctx, uint64_t addr, const char *file, int line);
	void *ctx;
	uint64_t bias;
	int called;
};

static int line_shifted(void *ctx, uint64_t addr, const char *file, int line)
{
	struct line_shift *sh = ctx;
	sh->called = 1;
	return sh->cb(sh->ctx, addr + sh->bias, file, line);
}

int btr_image_foreach_line(struct btr_image *img, uint64_t lo, uint64_t hi,
			   int (*cb)(void *ctx, uint64_t addr, const char *file, int line), void *ctx)
{
	if (!img || !cb || lo >= hi)
		return -BTR_ERR_INVAL;
	struct module *m = image_module_at(img, lo);
	if (!m)
		return -BTR_ERR_NOT_FOUND;
	if (load_lines(m) == 0) {
		/* hi beyond the module: its rows are all below m->hi anyway */
		uint64_t l = lo - m->bias, h = hi - m->bias < l ? UINT64_MAX : hi - m->bias;
		struct line_shift sh = { cb, ctx, m->bias, 0 };
		int rc = btr__dwline_foreach(m->f->dwl, l, h, line_shifted, &sh);
		if (rc != -BTR_ERR_NOMEM || sh.called)
			return rc;   /* out of memory before the first row: libdw */
	}
	int err = load_dwarf(m);
	if (err)
		return err;
	Dwarf_Die *cu = NULL;
	Dwarf_Addr cbias;
	while ((cu = dwfl_module_nextcu(m->f->dwmod, cu, &cbias)) != NULL) {
		Dwarf_Lines *lines;
		size_t n;
		if (dwarf_getsrclines(cu, &lines, &n) != 0)
			continue;
		for (size_t i = 0; i < n; i++) {
			Dwarf_Line *l = dwarf_onesrcline(lines, i);
			Dwarf_Addr a;
			int ln = 0;
			bool end_seq = false;
			if (!l || dwarf_lineaddr(l, &a) != 0 || dwarf_lineno(l, &ln) != 0 || ln <= 0)
				continue;
			if (dwarf_lineendsequence(l, &end_seq) == 0 && end_seq)
				continue;
			a += cbias + m->bias;
			if (a < lo || a >= hi)
				continue;
			const char *f = dwarf_linesrc(l, NULL, NULL);
			if (!f)
				continue;
			int rc = cb(ctx, a, f, ln);
			if (rc)
				return rc;
		}
	}
	return 0;
}
