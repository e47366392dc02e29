/* qemu_plugin_state.c - the plugin's state, at the bottom of its files:
 * the one struct plugin_state (g), the per-thread and per-vcpu variables
 * next to it, and qemu_plugin_version (QEMU reads it right after dlopen).
 * Data only: every other file of the plugin (qemu_plugin.h) reads and
 * writes these, and this file calls none of them.
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

BTR_QEMU_PLUGIN_VERSION_DEFINE;

struct plugin_state g = { .lock = PTHREAD_MUTEX_INITIALIZER, .gt_fd = -1, .retcomp = 1, .follow_fork = 1,
	.follow_exec = 1, .fork_fd = -1 };

/* The vcpu whose thread runs on this host thread (linux-user runs every
 * guest thread on its own host thread); -1 before its first TB.  Only
 * translation (qemu_code.c) asks. */
__thread int code_vcpu = -1;

int fork_fd[MAX_VCPUS];              /* fork_prepare's copy of the state, + 1 */
