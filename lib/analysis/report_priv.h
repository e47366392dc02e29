/* report_priv.h - between the report analysis (report.c) and its writers
 * (report_write.c): report.c calls them, never the other way. */
#ifndef BTR_REPORT_PRIV_H
#define BTR_REPORT_PRIV_H

#include <stdio.h>
#include "btr/report.h"
#include "btr/stream.h"

/* What the output says besides the report's counts (taken from the
 * stream at the analysis' end). */
struct btr_report_run {
	const char *name;                 /* the trace as named in the output */
	int lost;                         /* btr_stream_data_lost */
	struct btr_stream_stats stats;
	struct btr_stream_loss *losses;   /* every cause of lost data */
	size_t n_losses;
};

/* `btr report` as text and as one JSON object (docs/report.md).  Return
 * 0, or -BTR_ERR_NOMEM before anything was written. */
int btr__report_write_text(FILE *f, const struct btr_report_result *res, const struct btr_report_run *run);
int btr__report_write_json(FILE *f, const struct btr_report_result *res, const struct btr_report_run *run);

#endif
