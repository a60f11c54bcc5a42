/* Logging for sseqd: "<N>subsystem: message" lines on stderr. Safe to call from any
 * thread: each line goes out in one write. */
#include "log.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum log_level log_level = LOG_LVL_INFO;

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

void log_msg(enum log_level level, const char *subsystem, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n, m;

	if (level > log_level)
		return;
	n = snprintf(line, sizeof(line), "<%d>%s: ", (int)level, subsystem);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nowhere left to report it. */
	}
}
