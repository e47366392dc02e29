/* btr/ptflow.h - Intel PT flow reconstruction: packets + code -> the
 * executed instruction and branch stream.
 *
 * (Skeleton contract; the implementation issue refines it.  Keep the
 * callback style: decoders take bytes and callbacks, never descriptors.)
 */
#ifndef BTR_PTFLOW_H
#define BTR_PTFLOW_H

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"
#include "btr/image.h"
#include "btr/insn.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_ptflow_config {
	size_t sz;                 /* sizeof(struct btr_ptflow_config) */
	uint16_t cpu_family, cpu_model, cpu_stepping; /* for errata workarounds */
	uint8_t mtc_freq;
	uint32_t nom_freq;
	uint32_t cpuid15_eax, cpuid15_ebx;
	int no_retcomp;            /* return compression was disabled */
	unsigned n_ip_filter;
	uint64_t ip_filter[4][2];  /* [start, end] inclusive ranges */
	uint32_t tid;              /* copied into every event */
};

enum btr_flow_event_type {
	BTR_FLOW_ENABLE = 1,   /* tracing (re)enabled at .ip */
	BTR_FLOW_DISABLE,      /* tracing disabled after .ip */
	BTR_FLOW_GAP,          /* flow lost: .reason, .offset; resumes at next enable */
	BTR_FLOW_OVERFLOW,     /* OVF packet */
	BTR_FLOW_ASYNC,        /* interrupt/exception from .ip (to in branch event) */
	BTR_FLOW_PAGING,       /* PIP: .cr3 */
	BTR_FLOW_MODE,         /* execution mode change */
	BTR_FLOW_TSX_ABORT,
	BTR_FLOW_PTWRITE,      /* .payload */
	BTR_FLOW_STOP,         /* TraceStop */
};

struct btr_flow_event {
	enum btr_flow_event_type type;
	int reason;            /* GAP: negative btr_error */
	uint64_t offset;       /* stream offset of the packet that caused it */
	uint64_t ip;
	uint64_t tsc;          /* 0 if unknown */
	uint64_t payload;      /* PTWRITE payload, PAGING cr3 */
};

struct btr_ptflow_callbacks {
	/* Every branch (taken or not taken conditional, every unconditional
	 * and asynchronous transfer).  Return nonzero to stop decoding. */
	int (*branch)(void *ctx, const struct btr_branch *b);
	/* Every executed instruction, if non-NULL (slower). */
	int (*insn)(void *ctx, uint64_t ip, const struct btr_insn *insn);
	/* Events: enable, disable, gap, overflow, ... */
	int (*event)(void *ctx, const struct btr_flow_event *ev);
	void *ctx;
};

struct btr_ptflow;

/* Creates a flow decoder reading code from @img (borrowed: must outlive
 * the decoder).  @cfg may be NULL for defaults.  Returns 0 or
 * -BTR_ERR_NOMEM, -BTR_ERR_INVAL. */
int btr_ptflow_new(struct btr_image *img, const struct btr_ptflow_config *cfg,
		   struct btr_ptflow **out);
void btr_ptflow_free(struct btr_ptflow *f);

/* Decodes the PT stream @buf (@size bytes, caller-owned) and calls @cb.
 * May be called repeatedly with consecutive pieces of one stream.
 * Returns 0 when the buffer is consumed, a positive value if a callback
 * stopped decoding, or a negative error for a failure that is not a
 * trace gap (gaps are reported as events and decoding goes on). */
int btr_ptflow_decode(struct btr_ptflow *f, const uint8_t *buf, size_t size,
		      const struct btr_ptflow_callbacks *cb);

struct btr_ptflow_stats {
	uint64_t insns, branches, gaps, bytes;
	uint64_t by_kind[BTR_KIND__COUNT];
};
void btr_ptflow_stats(const struct btr_ptflow *f, struct btr_ptflow_stats *st);

#ifdef __cplusplus
}
#endif
#endif
