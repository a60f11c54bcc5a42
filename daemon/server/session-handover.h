/* A session's record in the hand-over of a restart in place (resume.c): written by the old
 * process, read by the new one (the same binary), through a memfd. */
#ifndef SSEQ_SESSION_HANDOVER_H
#define SSEQ_SESSION_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>

struct server;
struct session;

/* n bytes written to / read from fd whole: false if it fails or ends first. */
bool session_handover_put(int fd, const void *p, size_t n);
bool session_handover_get(int fd, void *p, size_t n);
/* fd stays open across the exec. */
void session_handover_keep(int fd);
/* s's record, its descriptors kept across the exec: false if the write fails. */
bool session_handover_write(int out, struct session *s);
/* The next record: 0 when its session is taken over (a connection again, with its handles,
 * unread input and unwritten output); -ENOMEM (or another error) when it is not but its
 * record was read to its end, so the next one can be (the client is told, then closed);
 * -EIO when the hand-over ends within it. */
int session_handover_adopt(int in, struct server *srv);

#endif
