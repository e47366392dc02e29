/* perfattr.c - perf_event_attr construction for Intel PT, BTS and LBR
 * (btr/perfattr.h).  Pure code: sysfs is read as plain files under a
 * root the caller names, nothing is opened through perf_event_open.
 */
#include "btr/perfattr.h"
#include "btr/error.h"
#include "internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SYSFS_DEFAULT "/sys/bus/event_source/devices"

/* ---- sysfs ---- */

int btr_pmu_format_parse(const char *spec, struct btr_pmu_format *out)
{
	if (!spec || !out)
		return -BTR_ERR_INVAL;
	const char *p = spec;
	while (isspace((unsigned char)*p))
		p++;
	if (!strncmp(p, "config", 6)) {
		p += 6;
		if (*p == ':')
			out->word = 0;
		else if (p[0] == '1' && p[1] == ':')
			out->word = 1, p++;
		else if (p[0] == '2' && p[1] == ':')
			out->word = 2, p++;
		else
			return -BTR_ERR_BAD_FORMAT;
	} else {
		return -BTR_ERR_BAD_FORMAT;
	}
	p++; /* ':' */
	out->mask = 0;
	for (;;) {
		char *end;
		errno = 0;
		unsigned long lo = strtoul(p, &end, 10), hi;
		if (end == p || errno)
			return -BTR_ERR_BAD_FORMAT;
		p = end;
		hi = lo;
		if (*p == '-') {
			p++;
			hi = strtoul(p, &end, 10);
			if (end == p || errno)
				return -BTR_ERR_BAD_FORMAT;
			p = end;
		}
		if (lo > hi || hi > 63)
			return -BTR_ERR_BAD_FORMAT;
		for (unsigned long b = lo; b <= hi; b++)
			out->mask |= 1ull << b;
		if (*p != ',')
			break;
		p++;
	}
	while (isspace((unsigned char)*p))
		p++;
	return *p ? -BTR_ERR_BAD_FORMAT : 0;
}

/* Reads the first line of @dir/@name into @buf; returns 0 or -1. */
static int read_line(const char *dir, const char *name, char *buf, size_t size)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	if (!fgets(buf, (int)size, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int cmp_cap(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);   /* name is the first member */
}

static int cmp_format(const void *a, const void *b)
{
	return strcmp(((const struct btr_pmu_format *)a)->name, ((const struct btr_pmu_format *)b)->name);
}

int btr_pmu_load(const char *sysfs_root, const char *name, struct btr_pmu *out)
{
	if (!name || !out)
		return -BTR_ERR_INVAL;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", name);
	out->type = -1;
	char dir[4096], sub[4200], line[256];
	snprintf(dir, sizeof(dir), "%s/%s", sysfs_root ? sysfs_root : SYSFS_DEFAULT, name);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	closedir(d);
	out->present = 1;
	if (read_line(dir, "type", line, sizeof(line)) == 0) {
		char *end;
		long v = strtol(line, &end, 10);
		if (end != line && v >= 0 && v <= INT32_MAX)
			out->type = (int)v;
	}
	if (read_line(dir, "max_nonturbo_ratio", line, sizeof(line)) == 0)
		out->max_nonturbo_ratio = strtoull(line, NULL, 10);
	if (read_line(dir, "tsc_art_ratio", line, sizeof(line)) == 0) {
		unsigned n, dd;
		if (sscanf(line, "%u:%u", &n, &dd) == 2) {
			out->tsc_art_num = n;
			out->tsc_art_den = dd;
		}
	}
	snprintf(sub, sizeof(sub), "%s/format", dir);
	if ((d = opendir(sub))) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.' || out->n_formats == BTR_PMU_MAX_FORMATS)
				continue;
			if (read_line(sub, e->d_name, line, sizeof(line)) < 0)
				continue;
			struct btr_pmu_format *f = &out->formats[out->n_formats];
			if (btr_pmu_format_parse(line, f) < 0) {
				btr_warn("%s/%s: cannot parse format '%s'", sub, e->d_name, line);
				closedir(d);
				return -BTR_ERR_BAD_FORMAT;
			}
			snprintf(f->name, sizeof(f->name), "%.31s", e->d_name);
			out->n_formats++;
		}
		closedir(d);
		qsort(out->formats, out->n_formats, sizeof(out->formats[0]), cmp_format);
	}
	snprintf(sub, sizeof(sub), "%s/caps", dir);
	if ((d = opendir(sub))) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.' || out->n_caps == BTR_PMU_MAX_CAPS)
				continue;
			if (read_line(sub, e->d_name, line, sizeof(line)) < 0)
				continue;
			/* the kernel prints caps with "%x" (pt_cap_show); a few
			 * PMUs print decimal names like "max_precise": both
			 * parse as hex for single digits */
			snprintf(out->caps[out->n_caps].name, sizeof(out->caps[0].name), "%.39s", e->d_name);
			out->caps[out->n_caps].value = strtoull(line, NULL, 16);
			out->n_caps++;
		}
		closedir(d);
		qsort(out->caps, out->n_caps, sizeof(out->caps[0]), cmp_cap);
	}
	return 0;
}

int btr_pmu_cap(const struct btr_pmu *pmu, const char *name, uint64_t *value)
{
	for (unsigned i = 0; pmu && name && i < pmu->n_caps; i++)
		if (!strcmp(pmu->caps[i].name, name)) {
			if (value)
				*value = pmu->caps[i].value;
			return 1;
		}
	return 0;
}

static const struct btr_pmu_format *find_format(const struct btr_pmu *pmu, const char *name)
{
	for (unsigned i = 0; i < pmu->n_formats; i++)
		if (!strcmp(pmu->formats[i].name, name))
			return &pmu->formats[i];
	return NULL;
}

int btr_pmu_set(const struct btr_pmu *pmu, const char *name, uint64_t value, uint64_t config[3])
{
	if (!pmu || !name || !config)
		return -BTR_ERR_INVAL;
	const struct btr_pmu_format *f = find_format(pmu, name);
	if (!f)
		return -BTR_ERR_NOT_FOUND;
	uint64_t v = 0, m = f->mask;
	unsigned bit = 0;
	for (unsigned b = 0; b < 64; b++) {
		if (!(m & (1ull << b)))
			continue;
		if (value & (1ull << bit))
			v |= 1ull << b;
		bit++;
	}
	if (bit < 64 && (value >> bit))
		return -BTR_ERR_INVAL;
	config[f->word] = (config[f->word] & ~m) | v;
	return 0;
}

/* ---- IP filters ---- */

/* Converts link-time virtual address @va of @e into a file offset through
 * the PT_LOAD program headers; returns 0 or -BTR_ERR_NOT_FOUND. */
static int va_to_offset(Elf *e, uint64_t va, uint64_t *off)
{
	size_t n;
	if (elf_getphdrnum(e, &n) != 0)
		return -BTR_ERR_BAD_ELF;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (va >= ph.p_vaddr && va - ph.p_vaddr < ph.p_filesz) {
			*off = va - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -BTR_ERR_NOT_FOUND;
}

static int find_symbol(Elf *e, const char *name, uint64_t *start, uint64_t *size)
{
	Elf_Scn *scn = NULL;
	int found = 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (!data || !sh.sh_entsize)
			continue;
		size_t cnt = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < cnt; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(data, (int)i, &sym))
				continue;
			if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF)
				continue;
			const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);
			if (nm && !strcmp(nm, name)) {
				*start = sym.st_value;
				*size = sym.st_size ? sym.st_size : 1;
				found = 1;
				break;
			}
		}
		if (found)
			break;
	}
	return found ? 0 : -BTR_ERR_NOT_FOUND;
}

static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	char buf[32];
	if (!len || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = 0;
	char *end;
	errno = 0;
	if (buf[0] == '-')
		return -1;
	*out = strtoull(buf, &end, 0);
	return (errno || *end) ? -1 : 0;
}

int btr_ip_filter_parse(const char *spec, struct btr_ip_filter *out)
{
	if (!spec || !out)
		return -BTR_ERR_INVAL;
	memset(out, 0, sizeof(*out));
	const char *at = strchr(spec, '@');
	size_t rlen = at ? (size_t)(at - spec) : strlen(spec);
	const char *dash = memchr(spec, '-', rlen);
	uint64_t a = 0, b = 0;
	int is_range = dash && parse_u64(spec, (size_t)(dash - spec), &a) == 0 &&
		       parse_u64(dash + 1, rlen - (size_t)(dash - spec) - 1, &b) == 0;
	if (!at) {
		if (!is_range) {
			btr_warn("--ip-filter '%s': expected START-END, START-END@MODULE or SYM@MODULE", spec);
			return -BTR_ERR_INVAL;
		}
		if (a > b) {
			btr_warn("--ip-filter '%s': start is above end", spec);
			return -BTR_ERR_INVAL;
		}
		out->start = a;
		out->end = b;
		return 0;
	}
	if (!at[1] || strlen(at + 1) >= sizeof(out->module) || !rlen) {
		btr_warn("--ip-filter '%s': missing symbol, range or module", spec);
		return -BTR_ERR_INVAL;
	}
	if (is_range && a > b) {
		btr_warn("--ip-filter '%s': start is above end", spec);
		return -BTR_ERR_INVAL;
	}
	const char *mod = at + 1;
	int fd = open(mod, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = btr_err_from_errno(errno);
		btr_warn("--ip-filter: %s: %s", mod, btr_errstr(e));
		return e;
	}
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	int rc = 0;
	if (!e || elf_kind(e) != ELF_K_ELF) {
		btr_warn("--ip-filter: %s: not an ELF file", mod);
		rc = -BTR_ERR_BAD_ELF;
		goto out;
	}
	uint64_t va_start = a, va_end = b;
	if (!is_range) {
		char sym[256];
		if (rlen >= sizeof(sym)) {
			rc = -BTR_ERR_INVAL;
			goto out;
		}
		memcpy(sym, spec, rlen);
		sym[rlen] = 0;
		uint64_t size;
		if ((rc = find_symbol(e, sym, &va_start, &size)) < 0) {
			btr_warn("--ip-filter: no function '%s' in %s", sym, mod);
			goto out;
		}
		va_end = va_start + size - 1;
	}
	uint64_t o1, o2;
	if ((rc = va_to_offset(e, va_start, &o1)) < 0 || (rc = va_to_offset(e, va_end, &o2)) < 0) {
		btr_warn("--ip-filter '%s': address not in a loaded segment of %s", spec, mod);
		goto out;
	}
	out->start = o1;
	out->end = o2;
	snprintf(out->module, sizeof(out->module), "%s", mod);
out:
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}

int btr_ip_filter_string(const struct btr_ip_filter *f, unsigned n, char *buf, size_t size)
{
	if (!f || !buf || !n || n > BTR_PT_MAX_FILTERS)
		return -BTR_ERR_INVAL;
	size_t len = 0;
	for (unsigned i = 0; i < n; i++) {
		if (f[i].end < f[i].start)
			return -BTR_ERR_INVAL;
		/* kernel/events/core.c perf_event_parse_addr_filter:
		 * "filter START/SIZE[@FILE]", filters separated by ',' or ' ' */
		int k = snprintf(buf + len, size > len ? size - len : 0, "%sfilter 0x%" PRIx64 "/0x%" PRIx64 "%s%s",
				 i ? "," : "", f[i].start, f[i].end - f[i].start + 1, f[i].module[0] ? "@" : "",
				 f[i].module);
		if (k < 0 || (size_t)k >= (size > len ? size - len : 0))
			return -BTR_ERR_OVERFLOW;
		len += (size_t)k;
	}
	return (int)len;
}

/* ---- PT ---- */

void btr_pt_opts_default(struct btr_pt_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->user = 1;
	o->tsc = 1;
	o->mtc = 1;
	o->mtc_period = -1;
	o->cyc_thresh = -1;
	o->psb_period = -1;
}

int btr_pt_opts_parse(const char *s, struct btr_pt_opts *o)
{
	if (!s || !o)
		return -BTR_ERR_INVAL;
	char buf[512];
	if (strlen(s) >= sizeof(buf))
		return -BTR_ERR_INVAL;
	strcpy(buf, s);
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		int *num = NULL;
		if (eq)
			*eq = 0;
		if (!strcmp(t, "cyc") && !eq)
			o->cyc = 1;
		else if (!strcmp(t, "notsc") && !eq)
			o->tsc = 0;
		else if (!strcmp(t, "nomtc") && !eq)
			o->mtc = 0;
		else if (!strcmp(t, "noretcomp") && !eq)
			o->no_retcomp = 1;
		else if (!strcmp(t, "ptw") && !eq)
			o->ptwrite = 1;
		else if (!strcmp(t, "pwr_evt") && !eq)
			o->pwr_evt = 1;
		else if (!strcmp(t, "nobranch") && !eq)
			o->branch_off = 1;
		else if (!strcmp(t, "cyc_thresh") && eq)
			num = &o->cyc_thresh;
		else if (!strcmp(t, "mtc_period") && eq)
			num = &o->mtc_period;
		else if (!strcmp(t, "psb_period") && eq)
			num = &o->psb_period;
		else {
			btr_warn("PT config: unknown term '%s' (cyc, cyc_thresh=N, mtc_period=N, psb_period=N, "
				 "notsc, nomtc, noretcomp, ptw, pwr_evt, nobranch)", t);
			return -BTR_ERR_INVAL;
		}
		if (num) {
			char *end;
			long v = strtol(eq + 1, &end, 0);
			if (end == eq + 1 || *end || v < 0 || v > 15) {
				btr_warn("PT config: %s=%s is not a number 0..15", t, eq + 1);
				return -BTR_ERR_INVAL;
			}
			*num = (int)v;
		}
	}
	return 0;
}

#define WHY(...) do { if (why && why_size) snprintf(why, why_size, __VA_ARGS__); } while (0)

/* Sideband the recorder turns into process, thread and module records. */
static void sideband(struct btr_perf_event_attr *a)
{
	a->flags |= BTR_PA_MMAP | BTR_PA_MMAP2 | BTR_PA_COMM | BTR_PA_COMM_EXEC | BTR_PA_TASK |
		    BTR_PA_CONTEXT_SWITCH | BTR_PA_SAMPLE_ID_ALL | BTR_PA_DISABLED | BTR_PA_ENABLE_ON_EXEC;
	a->sample_type |= BTR_PS_TID | BTR_PS_TIME | BTR_PS_CPU | BTR_PS_IDENTIFIER;
}

static void priv(struct btr_perf_event_attr *a, int user, int kernel)
{
	if (!user && !kernel)
		user = 1;
	if (!user)
		a->flags |= BTR_PA_EXCLUDE_USER;
	if (!kernel)
		a->flags |= BTR_PA_EXCLUDE_KERNEL;
	a->flags |= BTR_PA_EXCLUDE_HV;
}

/* Sets format @name, which must exist; @cap (if non-NULL) must be a
 * nonzero cap, and for a period @bitmap_cap must have bit @value set. */
static int pt_set(const struct btr_pmu *pmu, uint64_t cfg[3], const char *name, uint64_t value, const char *cap,
		  const char *bitmap_cap, char *why, size_t why_size)
{
	uint64_t v;
	if (cap && (!btr_pmu_cap(pmu, cap, &v) || !v)) {
		WHY("%s: the intel_pt PMU has no %s capability (caps/%s)", name, cap, cap);
		return -BTR_ERR_UNSUPPORTED;
	}
	if (bitmap_cap) {
		if (!btr_pmu_cap(pmu, bitmap_cap, &v) || value > 63 || !(v & (1ull << value))) {
			WHY("%s=%" PRIu64 " is not supported (caps/%s is 0x%" PRIx64 ")", name, value, bitmap_cap,
			    btr_pmu_cap(pmu, bitmap_cap, &v) ? v : 0);
			return -BTR_ERR_UNSUPPORTED;
		}
	}
	int rc = btr_pmu_set(pmu, name, value, cfg);
	if (rc == -BTR_ERR_NOT_FOUND)
		WHY("the intel_pt PMU has no '%s' format (kernel too old)", name);
	else if (rc < 0)
		WHY("%s=%" PRIu64 " does not fit its format", name, value);
	return rc == -BTR_ERR_NOT_FOUND ? -BTR_ERR_UNSUPPORTED : rc;
}

int btr_pt_attr(const struct btr_pmu *pmu, const struct btr_pt_opts *o, uint64_t aux_size,
		struct btr_perf_event_attr *attr, char *why, size_t why_size)
{
	if (!pmu || !o || !attr)
		return -BTR_ERR_INVAL;
	if (why && why_size)
		why[0] = 0;
	if (!pmu->present || pmu->type < 0) {
		WHY("no %s PMU", pmu->name[0] ? pmu->name : "intel_pt");
		return -BTR_ERR_NODEV;
	}
	memset(attr, 0, sizeof(*attr));
	attr->type = (uint32_t)pmu->type;
	attr->size = BTR_PERF_ATTR_SIZE;
	uint64_t cfg[3] = { 0, 0, 0 };
	int rc;
#define SET(...) do { if ((rc = pt_set(pmu, cfg, __VA_ARGS__, why, why_size)) < 0) return rc; } while (0)
	/* "pt" and "branch" are in every intel_pt format directory; without
	 * "pt" the kernel sets TraceEn itself (older kernels had no format) */
	if (find_format(pmu, "pt"))
		SET("pt", 1, NULL, NULL);
	if (!o->branch_off)
		SET("branch", 1, NULL, NULL);
	if (o->tsc)
		SET("tsc", 1, NULL, NULL);
	if (o->mtc) {
		uint64_t v;
		if (btr_pmu_cap(pmu, "mtc", &v) && v) {
			SET("mtc", 1, "mtc", NULL);
			SET("mtc_period", o->mtc_period < 0 ? 3 : (uint64_t)o->mtc_period, NULL, "mtc_periods");
		} else if (o->mtc_period >= 0) {
			WHY("mtc: the intel_pt PMU has no mtc capability (caps/mtc)");
			return -BTR_ERR_UNSUPPORTED;
		}
		/* MTC is a default: without the cap it is silently left out */
	}
	if (o->cyc) {
		SET("cyc", 1, "psb_cyc", NULL);
		if (o->cyc_thresh >= 0)
			SET("cyc_thresh", (uint64_t)o->cyc_thresh, NULL, "cycle_thresholds");
	} else if (o->cyc_thresh >= 0) {
		WHY("cyc_thresh needs cyc");
		return -BTR_ERR_INVAL;
	}
	if (o->psb_period >= 0)
		SET("psb_period", (uint64_t)o->psb_period, "psb_cyc", "psb_periods");
	if (o->no_retcomp)
		SET("noretcomp", 1, NULL, NULL);
	if (o->ptwrite)
		SET("ptw", 1, "ptwrite", NULL);
	if (o->pwr_evt)
		SET("pwr_evt", 1, "power_event_trace", NULL);
#undef SET
	if (o->n_filters) {
		uint64_t nr = 0;
		if (!btr_pmu_cap(pmu, "ip_filtering", &nr) || !nr || !btr_pmu_cap(pmu, "num_address_ranges", &nr) ||
		    nr < o->n_filters) {
			WHY("%u IP filter range(s) asked, the PMU has %" PRIu64 " (caps/num_address_ranges)",
			    o->n_filters, nr);
			return -BTR_ERR_UNSUPPORTED;
		}
		for (unsigned i = 0; i < o->n_filters; i++)
			if (!o->filters[i].module[0] && !o->kernel) {
				WHY("a kernel address range needs --kernel");
				return -BTR_ERR_INVAL;
			}
	}
	attr->config = cfg[0];
	attr->config1 = cfg[1];
	attr->config2 = cfg[2];
	/* PT has no samples; sample_period 1 is what perf sets for AUX
	 * events, and sample_id_all makes the sideband carry time/CPU */
	attr->sample_period = 1;
	priv(attr, o->user, o->kernel);
	sideband(attr);
	/* wake the recorder when a quarter of the AUX area is full (perf's
	 * default is half; a quarter leaves room while it copies) */
	attr->aux_watermark = (uint32_t)(aux_size / 4 > UINT32_MAX ? UINT32_MAX : aux_size / 4);
	return 0;
}

/* ---- BTS ---- */

int btr_bts_attr(const struct btr_pmu *pmu, int user, int kernel, struct btr_perf_event_attr *attr)
{
	if (!pmu || !attr)
		return -BTR_ERR_INVAL;
	if (!pmu->present || pmu->type < 0)
		return -BTR_ERR_NODEV;
	memset(attr, 0, sizeof(*attr));
	attr->type = (uint32_t)pmu->type;
	attr->size = BTR_PERF_ATTR_SIZE;
	attr->sample_period = 1;
	priv(attr, user, kernel);
	sideband(attr);
	return 0;
}

uint32_t btr_bts_debugctl(const struct btr_perf_event_attr *attr)
{
	/* arch/x86/events/intel/ds.c intel_pmu_enable_bts(): TR and BTS
	 * always; the config's OS/USR bits come from !exclude_kernel /
	 * !exclude_user (bts_event_init), and a missing one becomes
	 * BTS_OFF_OS / BTS_OFF_USR.  BTINT is set only for the legacy
	 * sampling BTS (INT in the config), never by intel_bts. */
	uint32_t v = BTR_DEBUGCTL_TR | BTR_DEBUGCTL_BTS;
	if (attr->flags & BTR_PA_EXCLUDE_KERNEL)
		v |= BTR_DEBUGCTL_BTS_OFF_OS;
	if (attr->flags & BTR_PA_EXCLUDE_USER)
		v |= BTR_DEBUGCTL_BTS_OFF_USR;
	return v;
}

/* ---- LBR ---- */

int btr_lbr_filter_parse(const char *expr, uint64_t *bst)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} terms[] = {
		{ "any", BTR_PSB_ANY }, { "call", BTR_PSB_CALL }, { "any_call", BTR_PSB_ANY_CALL },
		{ "any_return", BTR_PSB_ANY_RETURN }, { "ind_call", BTR_PSB_IND_CALL },
		{ "ind_jump", BTR_PSB_IND_JUMP }, { "cond", BTR_PSB_COND }, { "call_stack", BTR_PSB_CALL_STACK },
		{ "user", BTR_PSB_USER }, { "u", BTR_PSB_USER }, { "kernel", BTR_PSB_KERNEL }, { "k", BTR_PSB_KERNEL },
		{ "hw_index", BTR_PSB_HW_INDEX }, { "save_type", BTR_PSB_TYPE_SAVE },
		{ "no_flags", BTR_PSB_NO_FLAGS }, { "no_cycles", BTR_PSB_NO_CYCLES },
	};
	if (!expr || !bst)
		return -BTR_ERR_INVAL;
	uint64_t v = 0;
	const char *p = expr;
	while (*p) {
		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		size_t n = strcspn(p, ", \t");
		int found = 0;
		for (size_t i = 0; i < BTR_ARRAY_SIZE(terms); i++)
			if (strlen(terms[i].name) == n && !strncasecmp(p, terms[i].name, n)) {
				v |= terms[i].bit;
				found = 1;
			}
		if (!found) {
			btr_warn("LBR filter: unknown term '%.*s' (any, call, any_call, any_return, ind_call, ind_jump, "
				 "cond, call_stack, user, kernel, hw_index, save_type, no_flags, no_cycles)",
				 (int)n, p);
			return -BTR_ERR_BAD_FILTER;
		}
		p += n;
	}
	const uint64_t types = BTR_PSB_ANY | BTR_PSB_CALL | BTR_PSB_ANY_CALL | BTR_PSB_ANY_RETURN | BTR_PSB_IND_CALL |
			       BTR_PSB_IND_JUMP | BTR_PSB_COND | BTR_PSB_CALL_STACK;
	if (!(v & types))
		v |= BTR_PSB_ANY;
	if (!(v & (BTR_PSB_USER | BTR_PSB_KERNEL)))
		v |= BTR_PSB_USER;
	*bst = v;
	return 0;
}

/* LBR_SELECT class bits (enum btr_lbr_class numbering). */
#define L_KERNEL (1u << 0)
#define L_USER (1u << 1)
#define L_JCC (1u << 2)
#define L_REL_CALL (1u << 3)
#define L_IND_CALL (1u << 4)
#define L_RETURN (1u << 5)
#define L_IND_JMP (1u << 6)
#define L_REL_JMP (1u << 7)
#define L_FAR (1u << 8)
#define L_CALL_STACK (1u << 9)
#define L_ANY (L_JCC | L_REL_CALL | L_IND_CALL | L_RETURN | L_REL_JMP | L_IND_JMP | L_FAR)
#define L_SEL_MASK 0x1ffu

int btr_lbr_select_from_branch_type(uint64_t bst, uint32_t *msr)
{
	if (!msr)
		return -BTR_ERR_INVAL;
	/* hsw_lbr_sel_map (Haswell and later; Sandy Bridge is the same
	 * without CALL_STACK) */
	static const uint32_t map[18] = {
		[0] = L_USER, [1] = L_KERNEL, [3] = L_ANY,
		[4] = L_REL_CALL | L_IND_CALL | L_FAR,      /* ANY_CALL */
		[5] = L_RETURN | L_FAR,                     /* ANY_RETURN */
		[6] = L_IND_CALL,                           /* IND_CALL */
		[10] = L_JCC,                               /* COND */
		[11] = L_REL_CALL | L_IND_CALL | L_RETURN | L_CALL_STACK,
		[12] = L_IND_JMP,                           /* IND_JUMP */
		[13] = L_REL_CALL,                          /* CALL */
	};
	const uint64_t sw_only = BTR_PSB_HV | BTR_PSB_ABORT_TX | BTR_PSB_IN_TX | BTR_PSB_NO_TX;
	if (bst & sw_only)
		return -BTR_ERR_UNSUPPORTED;
	uint32_t mask = 0;
	for (unsigned b = 0; b < 18; b++)
		if (bst & (1ull << b))
			mask |= map[b];
	/* intel_pmu_setup_hw_lbr_filter: the low nine bits suppress, so
	 * they are inverted; EN_CALLSTACK enables */
	*msr = (~mask & L_SEL_MASK) | (mask & L_CALL_STACK);
	return 0;
}

int btr_lbr_attr(uint64_t bst, uint64_t period, struct btr_perf_event_attr *attr)
{
	if (!attr || !(bst & (BTR_PSB_USER | BTR_PSB_KERNEL)))
		return -BTR_ERR_INVAL;
	memset(attr, 0, sizeof(*attr));
	attr->type = 0;     /* PERF_TYPE_HARDWARE */
	attr->config = 0;   /* PERF_COUNT_HW_CPU_CYCLES */
	attr->size = BTR_PERF_ATTR_SIZE;
	attr->sample_period = period ? period : 100003;
	attr->branch_sample_type = bst;
	priv(attr, !!(bst & BTR_PSB_USER), !!(bst & BTR_PSB_KERNEL));
	sideband(attr);
	attr->sample_type |= BTR_PS_IP | BTR_PS_PERIOD | BTR_PS_BRANCH_STACK;
	return 0;
}
