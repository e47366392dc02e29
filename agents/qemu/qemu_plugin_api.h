/* qemu_plugin_api.h - the subset of QEMU's TCG plugin API that the btr
 * plugin (and the tests' counter, tests/tools/insn_count.c) use, bound so
 * that one plugin binary loads into both API generations:
 *
 *   API v1  QEMU 6.0 .. 8.2, e.g. Debian 12's qemu-user 7.2 (accepts 0..1)
 *   API v4  QEMU 9.2 and later, e.g. QEMU 10 built from Debian 13's
 *           source package by scripts/build-qemu.sh (accepts 2..4)
 *
 * Why our own declarations: Debian ships no qemu-plugin.h development
 * header, and the API is a small C ABI exported by the qemu-x86_64 binary
 * itself (`nm -D $(which qemu-x86_64) | grep qemu_plugin`).  The prototypes
 * below follow QEMU 7.2's and QEMU 10's include/qemu/qemu-plugin.h; only
 * what the plugins call is declared.
 *
 * What differs between the two, and how it is bridged:
 *  - qemu_plugin_version: QEMU reads it right after dlopen(), so a
 *    constructor (BTR_QEMU_PLUGIN_VERSION_DEFINE) sets it first, from the
 *    symbols this qemu-x86_64 exports (btr_qapi_pick_version).
 *  - qemu_plugin_register_vcpu_insn_exec_inline (v1) is gone in v2+: there
 *    the same "add IMM to *PTR before the instruction" is an instruction
 *    callback (btr_qapi_insn_exec_inline); same effect, a call instead of
 *    a few inline host instructions.  btr's plugin uses a per-vcpu
 *    scoreboard there instead (qemu_counter.c); the tests' counter the
 *    callback.
 *  - qemu_plugin_insn_data returns a pointer to the bytes in v1 but copies
 *    them into a caller's buffer in v3+ (same symbol name, another ABI):
 *    btr_qapi_insn_data returns a pointer in both, in v3+ to a per-thread
 *    buffer that stays valid for the next BTR_QAPI_DATA_SLOTS - 1 calls.
 *  - QEMU 9.0 and 9.1 (API v2, v3 without qemu_plugin_read_memory_vaddr)
 *    are not bound: the plugin declares v1 there and that QEMU refuses it
 *    with its own message, which `btr info` shows.
 * The two macros below redirect the v1 names used in the plugins' code to
 * the bridges, so the callers read as plain QEMU plugin code.
 */
#ifndef BTR_QEMU_PLUGIN_API_H
#define BTR_QEMU_PLUGIN_API_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

/* The API versions the plugins are written against: v1 (QEMU 7.2 accepts
 * 0..1) and v4 (QEMU 10 accepts 2..4). */
#define BTR_QEMU_PLUGIN_VERSION 1
#define BTR_QEMU_PLUGIN_VERSION_NEW 4

typedef uint64_t qemu_plugin_id_t;

/* Read by QEMU after dlopen(); defined by BTR_QEMU_PLUGIN_VERSION_DEFINE. */
extern QEMU_PLUGIN_EXPORT int qemu_plugin_version;

typedef struct qemu_info_t {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags {
	QEMU_PLUGIN_CB_NO_REGS,
	QEMU_PLUGIN_CB_R_REGS,
	QEMU_PLUGIN_CB_RW_REGS,
};

enum qemu_plugin_op {
	QEMU_PLUGIN_INLINE_ADD_U64,
	QEMU_PLUGIN_INLINE_STORE_U64,     /* v3 and later */
};

typedef void (*qemu_plugin_simple_cb_t)(qemu_plugin_id_t id);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index,
					      int64_t num, uint64_t a1, uint64_t a2,
					      uint64_t a3, uint64_t a4, uint64_t a5,
					      uint64_t a6, uint64_t a7, uint64_t a8);
typedef void (*qemu_plugin_vcpu_syscall_ret_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_idx,
						  int64_t num, int64_t ret);

void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_exit_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);
void qemu_plugin_register_vcpu_syscall_ret_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_ret_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void *qemu_plugin_insn_haddr(const struct qemu_plugin_insn *insn);

void qemu_plugin_outs(const char *string);

/* Memory callbacks (the same in API v1 and v4): after an instruction's
 * access of @vaddr. */
typedef uint32_t qemu_plugin_meminfo_t;
enum qemu_plugin_mem_rw {
	QEMU_PLUGIN_MEM_R = 1,
	QEMU_PLUGIN_MEM_W,
	QEMU_PLUGIN_MEM_RW,
};
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
					  void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
				      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw, void *userdata);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);

/* User-mode only, and missing from QEMU 10.0 as its source builds (weak:
 * NULL there; qemu_user_info.c does without them). */
const char *qemu_plugin_path_to_binary(void) __attribute__((weak, visibility("default")));
uint64_t qemu_plugin_start_code(void) __attribute__((weak, visibility("default")));


/* ---- the bridge between API v1 and v4 ---- */

/* Present only in API v1 (weak: NULL in a QEMU without it). */
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op,
						void *ptr, uint64_t imm)
	__attribute__((weak, visibility("default")));
/* Scoreboards, per-vcpu inline operations (v2 and later; weak: NULL in
 * QEMU 7.2): one slot per vcpu, which only that vcpu's thread writes
 * (qemu_counter.c). */
struct qemu_plugin_scoreboard;
typedef struct {
	struct qemu_plugin_scoreboard *score;
	size_t offset;
} qemu_plugin_u64;
struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size)
	__attribute__((weak, visibility("default")));
void qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(struct qemu_plugin_insn *insn, enum qemu_plugin_op op,
							 qemu_plugin_u64 entry, uint64_t imm)
	__attribute__((weak, visibility("default")));
uint64_t qemu_plugin_u64_get(qemu_plugin_u64 entry, unsigned int vcpu_index)
	__attribute__((weak, visibility("default")));

/* Present from API v4 on; only its address is used, to tell which API this
 * QEMU has. */
extern void qemu_plugin_read_memory_vaddr(void) __attribute__((weak, visibility("default")));
/* qemu_plugin_insn_data in its two forms, under two names for one symbol. */
const void *btr_qapi_insn_data_v1(const struct qemu_plugin_insn *insn) __asm__("qemu_plugin_insn_data")
	__attribute__((visibility("default")));
size_t btr_qapi_insn_data_v3(const struct qemu_plugin_insn *insn, void *dest, size_t len)
	__asm__("qemu_plugin_insn_data") __attribute__((visibility("default")));

/* The API version to declare to the qemu-x86_64 this plugin is loaded into. */
static inline int btr_qapi_pick_version(void)
{
	if (qemu_plugin_read_memory_vaddr && !qemu_plugin_register_vcpu_insn_exec_inline)
		return BTR_QEMU_PLUGIN_VERSION_NEW;
	return BTR_QEMU_PLUGIN_VERSION;
}

/* Defines qemu_plugin_version, set before QEMU reads it (dlopen runs the
 * constructor first).  Use once per plugin, at file scope. */
#define BTR_QEMU_PLUGIN_VERSION_DEFINE \
	QEMU_PLUGIN_EXPORT int qemu_plugin_version = BTR_QEMU_PLUGIN_VERSION; \
	__attribute__((constructor)) static void btr_qapi_set_version(void) \
	{ \
		qemu_plugin_version = btr_qapi_pick_version(); \
	} \
	extern int qemu_plugin_version

#define BTR_QAPI_DATA_SLOTS 8
static inline const void *btr_qapi_insn_data(const struct qemu_plugin_insn *insn)
{
	if (qemu_plugin_version < 3)
		return btr_qapi_insn_data_v1(insn);
	static __thread uint8_t slot[BTR_QAPI_DATA_SLOTS][16];
	static __thread unsigned next;
	uint8_t *buf = slot[next++ % BTR_QAPI_DATA_SLOTS];
	size_t got = btr_qapi_insn_data_v3(insn, buf, sizeof(slot[0]));
	if (got < sizeof(slot[0]))
		memset(buf + got, 0, sizeof(slot[0]) - got);
	return buf;
}
#define qemu_plugin_insn_data(insn) btr_qapi_insn_data(insn)

static inline void btr_qapi_add1(unsigned int vcpu_index, void *ptr)
{
	(void)vcpu_index;
	++*(uint64_t *)ptr;
}

/* QEMU_PLUGIN_INLINE_ADD_U64 of 1 to @ptr before @insn runs. */
static inline void btr_qapi_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op, void *ptr,
					     uint64_t imm)
{
	if (qemu_plugin_register_vcpu_insn_exec_inline) {
		qemu_plugin_register_vcpu_insn_exec_inline(insn, op, ptr, imm);
		return;
	}
	/* only ADD_U64 of 1 is used */
	for (uint64_t i = 0; i < imm; i++)
		qemu_plugin_register_vcpu_insn_exec_cb(insn, btr_qapi_add1, QEMU_PLUGIN_CB_NO_REGS, ptr);
}
#define qemu_plugin_register_vcpu_insn_exec_inline(insn, op, ptr, imm) \
	btr_qapi_insn_exec_inline(insn, op, ptr, imm)

#endif
