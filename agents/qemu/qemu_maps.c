/* qemu_maps.c - the plugin's module map (g.mods, MODULE_LOAD and
 * MODULE_UNLOAD records; each new module told to the files that place
 * things in modules) from the guest's /proc/self/maps and the ELF program
 * headers of the executable and its interpreter.
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

void write_module(const char *path, uint64_t start, uint64_t size, uint64_t pgoff, uint32_t prot)
{
	struct btr_record r = { .type = BTR_REC_MODULE_LOAD };
	r.u.module.pid = g.pid;
	r.u.module.prot = prot;
	r.u.module.start = start;
	r.u.module.size = size;
	r.u.module.pgoff = pgoff;
	r.u.module.path = path;
	int n = btr_elf_build_id(path, r.u.module.build_id, sizeof(r.u.module.build_id));
	r.u.module.build_id_len = n > 0 ? (uint8_t)n : 0;
	write_rec(&r);
}


void add_module(const char *path, uint64_t start, uint64_t size, uint64_t pgoff, uint32_t prot)
{
	write_module(path, start, size, pgoff, prot);
	code_forget(start, size);
	code_note_jitdump(path);
	flt_module(path, start, size, pgoff, prot);
	snap_module(path, start, size, pgoff, prot);
	int backed = code_file_backed(path);
	pthread_mutex_lock(&g.lock);
	if (g.n_mods < sizeof(g.mods) / sizeof(g.mods[0])) {
		struct mod *m = &g.mods[g.n_mods];
		m->start = start;
		m->size = size;
		m->pgoff = pgoff;
		m->prot = prot;
		m->backed = backed;
		if ((m->path = strdup(path)))
			g.n_mods++;
	}
	pthread_mutex_unlock(&g.lock);
}


/* munmap(@start, @size) by thread @t removed every module it covers
 * entirely.  @t's PT so far goes out first: it holds the calls into the
 * module, and a reader applies records in file order. */
void remove_modules(struct thr *t, uint64_t start, uint64_t size)
{
	for (unsigned i = 0; i < g.n_mods;) {
		struct mod *m = &g.mods[i];
		if (m->start >= start && m->start + m->size <= start + size) {
			pt_flush(t);
			update_check(t);
			struct btr_record r = { .type = BTR_REC_MODULE_UNLOAD };
			r.u.module.pid = g.pid;
			r.u.module.start = m->start;
			r.u.module.size = m->size;
			r.u.module.path = m->path;
			write_rec(&r);
			pthread_mutex_lock(&g.lock);
			free(m->path);
			*m = g.mods[--g.n_mods];
			pthread_mutex_unlock(&g.lock);
			continue;
		}
		i++;
	}
}

/* Adds the executable PT_LOAD segments of ELF @path whose first page
 * (file offset 0) is mapped at guest address @base_map. */
static void add_elf_segments(const char *path, uint64_t base_map)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 64 ||
	    pread(fd, ph, eh.e_phnum * sizeof(Elf64_Phdr), (off_t)eh.e_phoff) !=
		    (ssize_t)(eh.e_phnum * sizeof(Elf64_Phdr))) {
		close(fd);
		return;
	}
	close(fd);
	uint64_t v0 = UINT64_MAX;
	for (unsigned i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < v0)
			v0 = ph[i].p_vaddr;
	if (v0 == UINT64_MAX)
		return;
	uint64_t bias = eh.e_type == ET_DYN ? base_map - (v0 & ~0xfffull) : 0;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
			continue;
		uint64_t lo = (bias + ph[i].p_vaddr) & ~0xfffull;
		uint64_t hi = (bias + ph[i].p_vaddr + ph[i].p_memsz + 0xfff) & ~0xfffull;
		add_module(path, lo, hi - lo, ph[i].p_offset & ~0xfffull, PROT_READ | PROT_EXEC);
	}
}

/* The executable and the dynamic loader are mapped by QEMU itself before
 * the guest runs, so they are found in /proc/self/maps at the first TB.
 * QEMU maps guest code pages without host PROT_EXEC, so the executable
 * segments come from the ELF program headers: the loader is the file
 * mapped at the first guest pc, the executable is user_binary(); the
 * loader's load address is the nearest mapping of its file offset 0 below
 * the first pc (the host's own ld.so may be mapped too, elsewhere), the
 * executable's the nearest below QEMU's start of code or, when this QEMU
 * does not say (qemu_user_info.c), its lowest one. */
void read_maps(uint64_t first_pc)
{
	char exe[PATH_MAX] = "", interp[PATH_MAX] = "";
	uint64_t exe_base = 0, interp_base = 0;
	const char *bin = user_binary();
	if (!bin[0] || !realpath(bin, exe))
		exe[0] = 0;
	uint64_t sc = user_start_code();
	g.exe_mapped = 1;
	FILE *f = btr_procmaps_open(0);
	if (!f)
		return;
	char line[PATH_MAX + 128];
	struct { uint64_t lo, hi, off; char path[PATH_MAX]; } *m = malloc(sizeof(*m));
	if (!m) {
		fclose(f);
		return;
	}
	/* Two passes: find the loader's path, then the bases. */
	for (int pass = 0; pass < 2; pass++) {
		rewind(f);
		struct btr_procmap pm;
		while (btr_procmaps_next(f, line, sizeof(line), &pm)) {
			unsigned long long lo = pm.start, hi = pm.end, off = pm.off;
			const char *path = pm.file;
			if (path[0] != '/')
				continue;
			m->lo = lo - g.guest_base;
			m->hi = hi - g.guest_base;
			m->off = off;
			if (pass == 0) {
				if (first_pc >= m->lo && first_pc < m->hi)
					snprintf(interp, sizeof(interp), "%s", path);
				continue;
			}
			if (off != 0)
				continue;
			if (interp[0] && !strcmp(path, interp) && m->lo <= first_pc && m->lo > interp_base)
				interp_base = m->lo;
			if (exe[0] && !strcmp(path, exe) &&
			    (sc ? m->lo <= sc && m->lo > exe_base : !exe_base || m->lo < exe_base))
				exe_base = m->lo;
		}
	}
	fclose(f);
	free(m);
	if (exe[0] && exe_base)
		add_elf_segments(exe, exe_base);
	if (interp[0] && interp_base && strcmp(interp, exe))
		add_elf_segments(interp, interp_base);
}
