/* commands.c - the commands of btr: the one registry.  main.c dispatches
 * and prints `btr --help` from it; `btr --list-commands` prints it for the
 * tests (docs/cli.md "The list of commands"), which take from it the
 * commands they run and how (tests/cli_hostile.sh, cli_lost.sh,
 * cli_alloc_fail.sh, cli_write_fail.sh, cli_output.sh, cli_progress.sh),
 * and which check that each has its doc page and its test
 * (tests/cli_commands.sh).
 *
 * Strong references: a command listed here without its cmd_NAME (a
 * misspelt or missing function) fails to link, instead of vanishing from
 * `btr --help`.
 *
 * Forms: how a test runs the command, with the placeholders FILE (a trace:
 * .btr or perf.data), OUT (an output file; tests give a name ending in
 * .dot, which cfg takes as its format), FUNC (a function the traced
 * program ran), ELF and ADDR (an ELF file and an address in it), PROG (a
 * program to record), PROFILE (a profile btr wrote: fdata).  Each form's
 * flags say what it reads and writes (CLI_READS_*, CLI_WRITES_*). */
#include "cli.h"

/* The commands: int cmd_NAME(int argc, char **argv), argv[0] is the
 * command's name; each in its own cmd_NAME.c. */
int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_pt(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_callgraph(int argc, char **argv);
int cmd_flame(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_bolt(int argc, char **argv);
int cmd_afdo(int argc, char **argv);
int cmd_pprof(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_crash(int argc, char **argv);
int cmd_cov(int argc, char **argv);
int cmd_annotate(int argc, char **argv);
int cmd_cfg(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_diverge(int argc, char **argv);
int cmd_script(int argc, char **argv);
int cmd_import(int argc, char **argv);

#define T CLI_READS_TRACE
#define S CLI_WRITES_STDOUT
#define O CLI_WRITES_FILE
#define B CLI_BINARY
#define FORMS(...) ((const struct cli_form[]){ __VA_ARGS__, { 0, NULL } })

const struct cli_command cli_commands[] = {
	{ "record", cmd_record, "record a program's control flow into a .btr trace",
	  "record.md", "cli_record.sh", FORMS({ O | B, "record -q -o OUT -- PROG" }) },
	{ "report", cmd_report, "summarize a trace: instructions, branches, hot code",
	  "report.md", "cli_report.sh",
	  FORMS({ T | S, "report FILE" }, { T | S, "report --format json FILE" }) },
	{ "pt", cmd_pt, "Intel PT tools: pt dump (packets), pt decode (flow)",
	  "pt-dump.md", "cli_pt.sh",
	  FORMS({ T | S, "pt dump FILE" }, { T | S, "pt decode FILE" }, { T | S, "pt decode --stat FILE" }) },
	{ "trace", cmd_trace, "container tools: trace dump (records), trace info",
	  "format.md", "cli_trace.sh",
	  FORMS({ T | S, "trace dump FILE" }, { T | S, "trace info FILE" }, { T | S, "trace info --format json FILE" }) },
	{ "info", cmd_info, "which capture backends work on this machine, and why",
	  "record.md", "cli_record.sh", FORMS({ S, "info" }, { S, "info --format json" }) },
	{ "symbolize", cmd_symbolize, "map addresses to function+offset and file:line",
	  "image.md", "cli_symbolize.sh", FORMS({ CLI_READS_ELF | S, "symbolize --elf ELF ADDR" }) },
	{ "check", cmd_check, "find hijacked control flow and hooks (ROP, GOT, preload, shellcode)",
	  "check.md", "cli_check.sh", FORMS({ T | S, "check FILE" }, { T | S, "check --format json FILE" }) },
	{ "callgraph", cmd_callgraph, "call graph: per function instructions, calls, callers, callees",
	  "callgraph.md", "cli_callgraph.sh", FORMS({ T | S, "callgraph FILE" }, { T | O, "callgraph -o OUT FILE" }) },
	{ "flame", cmd_flame, "flame graphs: folded stacks, speedscope JSON, interactive SVG",
	  "flame.md", "cli_flame.sh", FORMS({ T | O, "flame -o OUT FILE" }, { T | O, "flame --format svg -o OUT FILE" }) },
	{ "timeline", cmd_timeline, "function timeline per thread: Chrome trace JSON, Perfetto",
	  "timeline.md", "cli_timeline.sh", FORMS({ T | O, "timeline -o OUT FILE" }) },
	{ "bolt", cmd_bolt, "BOLT profile (perf2bolt fdata, or pre-aggregated)",
	  "bolt.md", "cli_bolt.sh", FORMS({ T | O, "bolt -o OUT FILE" }) },
	{ "afdo", cmd_afdo, "LLVM sample profile (AutoFDO) for clang -fprofile-sample-use",
	  "pgo.md", "cli_afdo.sh", FORMS({ T | O, "afdo -o OUT FILE" }) },
	{ "pprof", cmd_pprof, "pprof profile (profile.proto, gzipped) for go tool pprof",
	  "pprof.md", "cli_pprof.sh", FORMS({ T | O | B, "pprof -o OUT FILE" }) },
	{ "merge", cmd_merge, "merge profiles of many runs (fdata, pprof, folded)",
	  "merge.md", "cli_merge.sh", FORMS({ O, "merge PROFILE -o OUT" }) },
	{ "crash", cmd_crash, "a crashed thread's signal, faulting instruction, last branches",
	  "crash.md", "cli_record.sh", FORMS({ T | S, "crash FILE" }) },
	{ "cov", cmd_cov, "coverage: drcov (Lighthouse), lcov (genhtml), Cobertura XML",
	  "cov.md", "cli_views.sh", FORMS({ T | O | B, "cov -o OUT FILE" }, { T | O, "cov --format lcov -o OUT FILE" }) },
	{ "annotate", cmd_annotate, "a function's disassembly or source with execution counts",
	  "annotate.md", "cli_views.sh", FORMS({ T | S, "annotate --function FUNC FILE" }) },
	{ "cfg", cmd_cfg, "a function's control-flow graph as a heat map (dot, svg, png)",
	  "cfg.md", "cli_views.sh", FORMS({ T | O, "cfg --function FUNC -o OUT FILE" }) },
	{ "diff", cmd_diff, "blocks and edges that differ between two traces",
	  "diff.md", "cli_views.sh", FORMS({ T | S, "diff FILE FILE" }) },
	{ "diverge", cmd_diverge, "the first branch where two runs went different ways",
	  "diverge.md", "cli_diverge.sh", FORMS({ T | S, "diverge FILE FILE" }) },
	{ "script", cmd_script, "print a trace's branches, one per line (perf script style)",
	  "script.md", "cli_script.sh", FORMS({ T | S, "script FILE" }) },
	{ "import", cmd_import, "convert a perf.data recording into a .btr trace",
	  "import.md", "cli_import.sh", FORMS({ T | O | B, "import -q -o OUT FILE" }) },
	{ NULL, NULL, NULL, NULL, NULL, NULL }
};

/* One line per form: NAME, DOC, TEST, the flags as words, the form
 * (tab-separated). */
void cli_commands_list(FILE *f)
{
	static const char *const words[] = { "reads-trace", "reads-elf", "writes-stdout", "writes-file", "binary" };
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		for (const struct cli_form *fm = c->forms; fm->args; fm++) {
			fprintf(f, "%s\t%s\t%s\t", c->name, c->doc, c->test);
			const char *sep = "";
			for (unsigned i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
				if (fm->flags & (1u << i)) {
					fprintf(f, "%s%s", sep, words[i]);
					sep = ",";
				}
			}
			fprintf(f, "\t%s\n", fm->args);
		}
	}
}
