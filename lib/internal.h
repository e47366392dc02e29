/* internal.h - helpers shared inside lib/, not part of the public API. */
#ifndef BTR_INTERNAL_H
#define BTR_INTERNAL_H

#include "btr/error.h"

#if defined(__GNUC__)
#define BTR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define btr_likely(x) __builtin_expect(!!(x), 1)
#define btr_unlikely(x) __builtin_expect(!!(x), 0)
#else
#define BTR_PRINTF(a, b)
#define btr_likely(x) (x)
#define btr_unlikely(x) (x)
#endif

void btr__log(enum btr_log_level level, const char *fmt, ...) BTR_PRINTF(2, 3);
#define btr_err(...) btr__log(BTR_LOG_ERROR, __VA_ARGS__)
#define btr_warn(...) btr__log(BTR_LOG_WARN, __VA_ARGS__)
#define btr_info(...) btr__log(BTR_LOG_INFO, __VA_ARGS__)
#define btr_debug(...) btr__log(BTR_LOG_DEBUG, __VA_ARGS__)

#define BTR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
