/* Logging for sseqd: one line per event on stderr, prefixed "<N>" with the syslog
 * priority so the journal keeps levels, then the subsystem and the object's identity. */
#ifndef SSEQ_LOG_H
#define SSEQ_LOG_H

#include <stdarg.h>

enum log_level {
	LOG_LVL_ERR = 3,
	LOG_LVL_WARN = 4,
	LOG_LVL_NOTICE = 5,
	LOG_LVL_INFO = 6,
	LOG_LVL_DEBUG = 7,
};

void log_set_level(enum log_level level);
int log_parse_level(const char *name);
void log_msg(enum log_level level, const char *subsystem, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_err(sub, ...) log_msg(LOG_LVL_ERR, sub, __VA_ARGS__)
#define log_warn(sub, ...) log_msg(LOG_LVL_WARN, sub, __VA_ARGS__)
#define log_notice(sub, ...) log_msg(LOG_LVL_NOTICE, sub, __VA_ARGS__)
#define log_info(sub, ...) log_msg(LOG_LVL_INFO, sub, __VA_ARGS__)
#define log_debug(sub, ...) log_msg(LOG_LVL_DEBUG, sub, __VA_ARGS__)

#endif
