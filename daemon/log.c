/* Logging for sseqd: "<N>subsystem: message" lines on stderr, or, when stderr is the
 * journal's stream (systemd says so in $JOURNAL_STREAM), entries sent with
 * sd_journal_send carrying the object's identity as fields (SSEQ_SESSION=, SSEQ_WORKER=),
 * so that `journalctl SSEQ_WORKER=gw3` finds a worker's lines. Safe to call from any
 * thread: each line goes out in one write or one datagram. */
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* CODE_FILE= would always name this file, not the caller. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

static enum log_level log_level = LOG_LVL_INFO;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static bool log_to_journal;

#define LOG_LINE_MAX 1024

static struct iovec log_field(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* One journal field, cut to its buffer. */
static struct iovec log_field(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	return (struct iovec){buf, (size_t)n < size ? (size_t)n : size - 1};
}

void log_set_level(enum log_level level)
{
	log_level = level;
}

int log_parse_level(const char *name)
{
	static const struct {
		const char *name;
		enum log_level level;
	} names[] = {
		{"err", LOG_LVL_ERR},
		{"error", LOG_LVL_ERR},
		{"warning", LOG_LVL_WARN},
		{"warn", LOG_LVL_WARN},
		{"notice", LOG_LVL_NOTICE},
		{"info", LOG_LVL_INFO},
		{"debug", LOG_LVL_DEBUG},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i].name) == 0)
			return (int)names[i].level;
	return -1;
}

/* systemd's own test (systemd.exec(5), $JOURNAL_STREAM): our stderr is the stream the
 * journal set up, not a terminal or a file it was redirected to since. */
static void log_detect(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return;
	log_to_journal =
		(unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

bool log_journal(void)
{
	pthread_once(&log_once, log_detect);
	return log_to_journal;
}

/* One entry through the native protocol: 0, or a negative errno (then stderr has it). */
static int log_send(
	enum log_level level, const char *subsystem, const struct log_who *who, const char *message)
{
	char msg[LOG_LINE_MAX + 80], prio[16], ident[64], sub[64], session[48], worker[96];
	struct iovec iov[6];
	int n = 0;

	/* Fields are iovecs of their own: none needs a terminator on the wire. */
	iov[n++] = log_field(msg, sizeof(msg), "MESSAGE=%s: %s", subsystem, message);
	iov[n++] = log_field(prio, sizeof(prio), "PRIORITY=%d", (int)level);
	iov[n++] = log_field(
		ident, sizeof(ident), "SYSLOG_IDENTIFIER=%s", program_invocation_short_name);
	iov[n++] = log_field(sub, sizeof(sub), "SSEQ_SUBSYSTEM=%s", subsystem);
	if (who && who->session)
		iov[n++] =
			log_field(session, sizeof(session), "SSEQ_SESSION=%" PRIu64, who->session);
	if (who && who->worker && *who->worker)
		iov[n++] = log_field(worker, sizeof(worker), "SSEQ_WORKER=%s", who->worker);
	return sd_journal_sendv(iov, n);
}

static void log_write(enum log_level level, const char *subsystem, const struct log_who *who,
	const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	int n, m;

	n = snprintf(line, sizeof(line), "<%d>%s: ", (int)level, subsystem);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	/* The journal gets the message without the prefix: PRIORITY= says it. */
	if (log_journal() && log_send(level, subsystem, who, line + n) == 0)
		return;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nowhere left to report it. */
	}
}

void log_msg(enum log_level level, const char *subsystem, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	log_write(level, subsystem, NULL, fmt, ap);
	va_end(ap);
}

void log_about(enum log_level level, const char *subsystem, const struct log_who *who,
	const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	log_write(level, subsystem, who, fmt, ap);
	va_end(ap);
}
