/* cmd_info.c - btr info: which capture backends work here, and why; the
 * CPU's tracing facilities in detail (btr/hwinfo.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cmd.h"
#include "btr/capture.h"
#include "btr/hwinfo.h"

static const struct cli_opt opts[] = {
	{ "verbose", 'v', CLI_NOARG, "  -v, --verbose     text: the details after the five backend lines\n", NULL },
	{ "format", 'f', CLI_ARG,
	  "  -f, --format FMT  text (default), or json: an object with one member per\n"
	  "                    backend, {\"usable\": bool, \"reason\": string, ...details};\n"
	  "                    pt, bts and lbr also carry \"machine\"\n", NULL },
	{ "sysfs", 's', CLI_ARG,
	  "      --sysfs DIR   read the PMU descriptions from DIR instead of\n"
	  "                    /sys/bus/event_source/devices (for tests; probes stay real)\n", NULL },
	{ "help", 'h', CLI_NOARG, "  -h, --help        this help\n", NULL },
	{ 0 },
};

static const struct cli_cmd cmd = {
	"info",
	"Usage: btr info [-v] [--format text|json] [--sysfs DIR]\n"
	"Probes every capture backend (pt, bts, lbr, qemu, step) and prints whether it\n"
	"is usable on this machine and the exact reason; with -v (and always in JSON)\n"
	"the details behind it:\n"
	"CPUID leaf 0x14 (Intel PT), CPUID.1:EDX[21] (DS, for BTS), the LBR depth and\n"
	"format, the intel_pt / intel_bts PMUs with their sysfs format and caps,\n"
	"kernel.perf_event_paranoid and whether a hypervisor is underneath.\n\n",
	opts,
	NULL,
	0, 0, NULL, "unexpected argument '%s'",
};


static const char *yesno(int v)
{
	return v ? "yes" : "no";
}

static const char *tf(int v)
{
	return v ? "true" : "false";
}

static void json_pmu(const struct btr_pmu *p)
{
	printf("{\"present\": %s, \"type\": %d, \"format\": {", tf(p->present), p->type);
	for (unsigned i = 0; i < p->n_formats; i++) {
		const struct btr_pmu_format *f = &p->formats[i];
		printf("%s", i ? ", " : "");
		btr_json_str(stdout, f->name);
		printf(": {\"word\": %u, \"mask\": \"0x%" PRIx64 "\"}", f->word, f->mask);
	}
	printf("}, \"caps\": {");
	for (unsigned i = 0; i < p->n_caps; i++) {
		printf("%s", i ? ", " : "");
		btr_json_str(stdout, p->caps[i].name);
		printf(": %" PRIu64, p->caps[i].value);
	}
	printf("}}");
}

/* The machine facts, inside each hardware backend's member (the top
 * level has one member per backend only: docs/contract.md). */
static void json_machine(const struct btr_hwinfo *hw)
{
	printf(", \"machine\": {\"vendor\": ");
	btr_json_str(stdout, hw->vendor);
	printf(", \"family\": %u, \"model\": %u, \"stepping\": %u, \"hypervisor\": %s, \"hypervisor_vendor\": ",
	       hw->family, hw->model, hw->stepping, tf(hw->hypervisor));
	btr_json_str(stdout, hw->hypervisor_vendor);
	printf(", \"perf_event_paranoid\": %d, \"paranoid_meaning\": ", hw->paranoid);
	btr_json_str(stdout, btr_hwinfo_paranoid_text(hw->paranoid));
	printf("}");
}

static void text_pmu(const char *name, const struct btr_pmu *p)
{
	if (!p->present) {
		printf("  %s PMU:    absent (no %s in sysfs)\n", name, name);
		return;
	}
	printf("  %s PMU:    type %d\n", name, p->type);
	if (p->n_formats) {
		printf("    format:");
		for (unsigned i = 0; i < p->n_formats; i++) {
			const struct btr_pmu_format *f = &p->formats[i];
			/* back to the kernel's notation: "config1:0-7,32-35" */
			printf(" %s=config%s:", f->name, f->word ? (f->word == 1 ? "1" : "2") : "");
			int first = 1;
			for (int bit = 0; bit < 64;) {
				if (!(f->mask >> bit & 1)) {
					bit++;
					continue;
				}
				int end = bit;
				while (end + 1 < 64 && (f->mask >> (end + 1) & 1))
					end++;
				printf(end > bit ? "%s%d-%d" : "%s%d", first ? "" : ",", bit, end);
				first = 0;
				bit = end + 1;
			}
		}
		printf("\n");
	}
	if (p->n_caps) {
		printf("    caps:");
		for (unsigned i = 0; i < p->n_caps; i++)
			printf(" %s=%" PRIx64, p->caps[i].name, p->caps[i].value);
		printf("\n");
	}
}

/* Which qemu-x86_64 the qemu backend uses, and why not the ones before it
 * (btr_qemu_select); NULL when the plugin itself is missing. */
static struct btr_qemu_selection *qemu_selection(void)
{
	char plugin[4096];
	struct btr_qemu_selection *s;
	if (btr_qemu_find_plugin(NULL, plugin, sizeof(plugin)) < 0 || !(s = malloc(sizeof(*s))))
		return NULL;
	btr_qemu_select(NULL, plugin, s);
	return s;
}

static void text_qemu(void)
{
	struct btr_qemu_selection *s = qemu_selection();
	/* one line each when more than one was tried */
	for (size_t i = 0; s && s->n > 1 && i < s->n; i++) {
		const struct btr_qemu_candidate *c = &s->c[i];
		printf("      %s %s (%s%s%s)%s%s\n", c->usable ? "uses" : "rejected", c->path, c->source,
		       c->version[0] ? ", QEMU " : "", c->version, c->usable ? "" : ": ", c->why);
	}
	free(s);
}

static void json_qemu(void)
{
	struct btr_qemu_selection *s = qemu_selection();
	printf(", \"candidates\": [");
	for (size_t i = 0; s && i < s->n; i++) {
		const struct btr_qemu_candidate *c = &s->c[i];
		printf("%s{\"path\": ", i ? ", " : "");
		btr_json_str(stdout, c->path);
		printf(", \"source\": ");
		btr_json_str(stdout, c->source);
		printf(", \"version\": ");
		btr_json_str(stdout, c->version);
		printf(", \"usable\": %s, \"why\": ", tf(c->usable));
		btr_json_str(stdout, c->why);
		printf("}");
	}
	printf("]");
	free(s);
}

struct args {
	int json, verbose;
	const char *sysfs;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	switch (key) {
	case 'f':
		return cli_format_text_json("info", arg, &x->json, "unknown format '%s'");
	case 's': x->sysfs = arg; break;
	case 'v': x->verbose = 1; break;
	}
	return EXIT_OK;
}

int cmd_info(int argc, char **argv)
{
	struct args x = { 0, 0, NULL };
	int first;
	int prc = cli_cmd_parse(&cmd, argc, argv, NULL, on_opt, &x, &first);
	if (prc != EXIT_OK)
		return prc == CLI_CMD_DONE ? EXIT_OK : prc;
	int json = x.json, verbose = x.verbose;
	const char *sysfs = x.sysfs;

	struct btr_hwinfo *hw = malloc(sizeof(*hw));
	if (!hw) {
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	btr_hwinfo_gather(sysfs, hw);
	const struct btr_pt_cpuid *pt = &hw->pt;

	if (json)
		printf("{");
	for (size_t i = 0; i < btr_capture_count(); i++) {
		const struct btr_capture_backend *b = btr_capture_get(i);
		struct btr_capture_probe p;
		btr_capture_probe_backend(b, &p);
		if (json) {
			printf("%s\n  ", i ? "," : "");
			btr_json_str(stdout, b->name);
			printf(": {\"usable\": %s, \"reason\": ", p.usable ? "true" : "false");
			btr_json_str(stdout, p.reason);
			if (!strcmp(b->name, "pt")) {
				printf(", \"cpuid\": {\"supported\": %s", tf(pt->valid));
				if (pt->valid)
					printf(", \"cr3_filtering\": %s, \"psb_cyc\": %s, \"ip_filtering\": %s, \"mtc\": %s, "
					       "\"ptwrite\": %s, \"power_event_trace\": %s, \"topa\": %s, "
					       "\"topa_multiple_entries\": %s, \"single_range_output\": %s, "
					       "\"lip\": %s, \"num_address_ranges\": %u, \"mtc_periods\": \"0x%x\", "
					       "\"cycle_thresholds\": \"0x%x\", \"psb_periods\": \"0x%x\"",
					       tf(pt->cr3_filtering), tf(pt->psb_cyc), tf(pt->ip_filtering), tf(pt->mtc),
					       tf(pt->ptwrite), tf(pt->power_event_trace), tf(pt->topa),
					       tf(pt->topa_multiple), tf(pt->single_range), tf(pt->lip),
					       pt->num_address_ranges, pt->mtc_periods, pt->cycle_thresholds,
					       pt->psb_periods);
				printf("}, \"pmu\": ");
				json_pmu(&hw->intel_pt);
			} else if (!strcmp(b->name, "bts")) {
				printf(", \"ds\": %s, \"pmu\": ", tf(hw->ds));
				json_pmu(&hw->intel_bts);
			} else if (!strcmp(b->name, "lbr")) {
				printf(", \"depth\": %u, \"format\": %d, \"format_name\": ", hw->lbr_depth,
				       hw->lbr_format);
				btr_json_str(stdout, hw->lbr_format >= 0 ? btr_lbr_format_name(hw->lbr_format) : "");
				printf(", \"arch_lbr\": %s, \"arch_lbr_depths\": \"0x%x\", \"pmu_name\": ",
				       tf(hw->arch_lbr), hw->arch_lbr_depths);
				btr_json_str(stdout, hw->pmu_name);
			}
			if (!strcmp(b->name, "pt") || !strcmp(b->name, "bts") || !strcmp(b->name, "lbr"))
				json_machine(hw);
			if (!strcmp(b->name, "qemu"))
				json_qemu();
			printf("}");
		} else {
			printf("%-5s %-3s %s\n", b->name, p.usable ? "yes" : "no", p.reason);
			if (!strcmp(b->name, "qemu"))
				text_qemu();
		}
	}
	if (json) {
		printf("\n}\n");
	} else if (verbose) {
		printf("\nmachine:\n");
		printf("  cpu:             %s family %u model 0x%x stepping %u\n", hw->vendor, hw->family, hw->model,
		       hw->stepping);
		if (strcmp(hw->vendor, "GenuineIntel"))
			printf("  note:            not an Intel CPU: Intel PT, BTS and Intel's LBR are not available\n");
		printf("  hypervisor:      %s%s%s%s\n", yesno(hw->hypervisor), hw->hypervisor_vendor[0] ? " (" : "",
		       hw->hypervisor_vendor, hw->hypervisor_vendor[0] ? ")" : "");
		if (hw->paranoid == -100)
			printf("  perf_event_paranoid: %s\n", btr_hwinfo_paranoid_text(hw->paranoid));
		else
			printf("  perf_event_paranoid: %d (%s)\n", hw->paranoid, btr_hwinfo_paranoid_text(hw->paranoid));
		printf("pt:\n");
		if (!pt->valid) {
			printf("  CPUID:           no Intel PT (CPUID.(7,0):EBX[25] clear%s)\n",
			       hw->hypervisor ? "; hypervisors rarely pass PT through" : "");
		} else {
			printf("  CPUID 0x14:      CR3 filtering %s, configurable PSB and CYC %s, IP filtering %s (%u "
			       "ranges), MTC %s (periods 0x%x), PTWRITE %s, power events %s\n",
			       yesno(pt->cr3_filtering), yesno(pt->psb_cyc), yesno(pt->ip_filtering), pt->num_address_ranges,
			       yesno(pt->mtc), pt->mtc_periods, yesno(pt->ptwrite), yesno(pt->power_event_trace));
			printf("                   ToPA %s (multiple entries %s), single-range output %s, LIP %s, "
			       "CYC thresholds 0x%x, PSB periods 0x%x\n",
			       yesno(pt->topa), yesno(pt->topa_multiple), yesno(pt->single_range), yesno(pt->lip),
			       pt->cycle_thresholds, pt->psb_periods);
		}
		text_pmu("intel_pt", &hw->intel_pt);
		printf("bts:\n  DS (CPUID.1:EDX[21]): %s\n", yesno(hw->ds));
		text_pmu("intel_bts", &hw->intel_bts);
		printf("lbr:\n  depth:           %s", hw->lbr_depth ? "" : "unknown (no cpu/caps/branches in sysfs)");
		if (hw->lbr_depth)
			printf("%u (sysfs cpu/caps/branches%s%s)", hw->lbr_depth, hw->pmu_name[0] ? ", " : "",
			       hw->pmu_name);
		printf("\n  format:          ");
		if (hw->lbr_format >= 0)
			printf("%d: %s\n", hw->lbr_format, btr_lbr_format_name(hw->lbr_format));
		else
			printf("unknown (IA32_PERF_CAPABILITIES %s)\n",
			       hw->pdcm ? "needs root and the msr module: /dev/cpu/0/msr"
					: "does not exist: CPUID.1:ECX[15] PDCM clear");
		printf("  architectural LBR: %s", yesno(hw->arch_lbr));
		if (hw->arch_lbr)
			printf(" (depths bitmap 0x%x)", hw->arch_lbr_depths);
		printf("\n");
		/* docs/record.md, "Selecting what is traced": the same table */
		printf("selection (btr record options; docs/record.md, \"Selecting what is traced\"):\n");
		if (pt->valid && pt->ip_filtering)
			printf("  pt:    --ip-filter in hardware (%u ranges), --user/--kernel, --snapshot\n",
			       pt->num_address_ranges);
		else
			printf("  pt:    --ip-filter in hardware (%s), --user/--kernel, --snapshot\n",
			       pt->valid ? "this CPU has no IP filtering" : "no Intel PT here");
		printf("  bts:   --user/--kernel, --snapshot (no IP ranges: BTS stores every branch)\n");
		printf("  lbr:   --lbr-filter (branch classes), --user/--kernel (no IP ranges)\n");
		printf("  qemu:  --ip-filter in software (8 ranges; code outside runs without callbacks), --start/--stop "
		       "in software, --snapshot SIZE and --trigger SYM (flight recorder: windows of the last SIZE "
		       "bytes per thread); user code only\n");
		printf("  step:  --ip-filter in software (8 ranges; code outside runs at full speed), --start/--stop, "
		       "--ring, --filter in software; user code only\n");
	}
	free(hw);
	return EXIT_OK;
}
