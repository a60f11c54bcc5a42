/* sseqd's command line: the option set its own rows and the backends' make, parsed into
 * the server's options and the registry's. */
#ifndef SSEQ_CMDLINE_H
#define SSEQ_CMDLINE_H

#include "option.h"
#include "registry.h"
#include "server.h"

struct cmdline {
	struct server_options srv;
	struct registry reg; /* --backend, and each backend's options */
	struct option_set set;
	char socket_buf[108]; /* the default socket's path, made by main */
};

/* argv into c, at the defaults where an option is not given: 0, or < 0 once the refusal
 * is on stderr. --help and --version print and exit. */
int cmdline_parse(struct cmdline *c, int argc, char **argv);

#endif
