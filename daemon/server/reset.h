/* Device resets (reset.c): after a completion found the device lost, name the culprit,
 * build the context again (or restart in place: resume.h) and keep serving. */
#ifndef SSEQ_RESET_H
#define SSEQ_RESET_H

#include <stdint.h>

struct server;

/* The reset after a completion found the device lost; first_failed is the stream whose
 * event failed first. */
void reset_device(struct server *srv, uint32_t first_failed);

#endif
