/* btr/btr.h - umbrella header for the btr library. */
#ifndef BTR_BTR_H
#define BTR_BTR_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include "btr/version.h"
#include "btr/error.h"
#include "btr/text.h"
#include "btr/branch.h"
#include "btr/insn.h"
#include "btr/image.h"
#include "btr/trace.h"
#include "btr/pt.h"
#include "btr/ptflow.h"
#include "btr/bts.h"
#include "btr/lbr.h"
#include "btr/stream.h"
#include "btr/batch.h"
#include "btr/report.h"
#include "btr/analysis.h"
#include "btr/callstack.h"
#include "btr/profile.h"
#include "btr/blocks.h"
#include "btr/cov.h"
#include "btr/diff.h"
#include "btr/diverge.h"
#include "btr/cfg.h"
#include "btr/annotate.h"
#include "btr/check.h"
#include "btr/crash.h"
#include "btr/script.h"
#include "btr/file.h"

#pragma GCC visibility pop

#endif
