/* step_agent.h - the shared-memory ring between `btr record -b step
 * --inproc` and its in-process agent (btr-step-agent.so, agents/step/step_agent.c).
 *
 * The agent, preloaded into the traced program, sets TF and catches the
 * SIGTRAP after every instruction in its own handler, which only appends
 * the new IP to this ring (one 8-byte store and an index update) and sets
 * TF again.  btr drains the ring and turns the IPs into BTS records with
 * the same code as the ptrace path.  One writer (the traced thread), one
 * reader (btr): head is written by the agent only, tail by btr only. */
#ifndef BTR_STEP_AGENT_H
#define BTR_STEP_AGENT_H

#include <stdint.h>

#define SA_MAGIC 0x47414253u      /* "SBAG" */
#define SA_CAP (1u << 20)         /* IPs in the ring (8 MiB) */
#define SA_ENV "BTR_STEP_SHM"

enum {
	SA_INIT = 0,      /* created by btr */
	SA_TRACING = 1,   /* the agent runs */
	SA_DONE = 2,      /* the program is exiting; the agent waits for the drain */
	SA_DEFEATED = 3,  /* tracing stopped: @why says why */
};

struct sa_hdr {
	uint32_t magic;
	uint32_t state;
	uint64_t head;            /* IPs written (agent) */
	uint64_t tail;            /* IPs consumed (btr) */
	uint64_t traps;
	int32_t tid;              /* the traced thread */
	uint32_t untraced_threads;/* other threads (not traced by the agent) */
	char why[192];
	uint64_t ip[SA_CAP];
};

#endif
