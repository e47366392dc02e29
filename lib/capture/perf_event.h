/* perf_event.h - what the hardware backends (perf_pt.c, perf_bts.c,
 * perf_lbr.c) share: one recorder loop over perf_event_open rings
 * (perf_event.c).  Private to lib/capture/. */
#ifndef BTR_CAPTURE_PERF_EVENT_H
#define BTR_CAPTURE_PERF_EVENT_H

#include "btr/capture.h"
#include "btr/perfattr.h"
#include "btr/trace.h"

/* One recording, as a backend describes it. */
struct btr_perf_capture {
	const char *backend;            /* "pt", "bts", "lbr": the MACHINE record's backend */
	struct btr_perf_event_attr attr;/* the event (see btr/perfattr.h) */
	enum btr_rec_type aux_type;     /* BTR_REC_PT / BTR_REC_BTS for AUX data; 0: no AUX area */
	uint64_t aux_size;              /* AUX bytes per ring (a power of two) */
	int snapshot;                   /* AUX read-only (overwrite); written on SIGUSR2 / at the end */
	char filter[4096];              /* PERF_EVENT_IOC_SET_FILTER string, "" for none */
	uint32_t machine_flags;         /* BTR_MACHINE_* */
	uint16_t lbr_depth;
	uint8_t mtc_freq, cyc_thresh;
	uint32_t nom_freq;
};

/* Runs the recording: starts opts->argv (held until the events are open
 * and enabled on exec), or attaches to opts->attach_pid, or records every
 * CPU (opts->system_wide) while argv runs; reads the rings until the
 * command (or the attached process) ends or SIGINT/SIGTERM arrives; turns
 * the sideband into MODULE/THREAD/PROCESS records and AUX data into PT /
 * BTS records, LBR samples into LBR records; writes opts->output
 * completely or not at all.  Returns 0 or a negative error (one line
 * logged). */
int btr_perf_capture_run(const struct btr_capture_opts *opts, struct btr_perf_capture *pc,
			 struct btr_capture_result *res);

/* The refusal every hardware backend gives when its mechanism is
 * missing: logs "NAME: REASON; record with -b qemu (software Intel PT) or
 * -b step (ptrace) instead" and returns -BTR_ERR_NODEV. */
int btr_perf_refuse(const char *name, const char *reason);

/* Maps opts->user / opts->kernel to the effective pair (neither: user). */
void btr_perf_privilege(const struct btr_capture_opts *opts, int *user, int *kernel);

#endif
