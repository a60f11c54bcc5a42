/* Logging for sseqd: one line per event on stderr, prefixed "<N>" with the syslog
 * priority so the journal keeps levels, then the subsystem and the object's identity;
 * under systemd, journal entries whose fields also carry that identity. */
#ifndef SSEQ_LOG_H
#define SSEQ_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

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

/* Whom a line is about. In the journal: SSEQ_SESSION= and SSEQ_WORKER= (left out when 0
 * or empty); on stderr the message itself must say it. */
struct log_who {
	uint64_t session;
	const char *worker;
};

void log_about(enum log_level level, const char *subsystem, const struct log_who *who,
	const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Whether lines go to the journal as entries with fields ($JOURNAL_STREAM is our stderr). */
bool log_journal(void);

#define log_err(sub, ...) log_msg(LOG_LVL_ERR, sub, __VA_ARGS__)
#define log_warn(sub, ...) log_msg(LOG_LVL_WARN, sub, __VA_ARGS__)
#define log_notice(sub, ...) log_msg(LOG_LVL_NOTICE, sub, __VA_ARGS__)
#define log_info(sub, ...) log_msg(LOG_LVL_INFO, sub, __VA_ARGS__)
#define log_debug(sub, ...) log_msg(LOG_LVL_DEBUG, sub, __VA_ARGS__)

#endif
