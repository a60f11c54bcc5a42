/* The restart in place (resume.c): exec, same PID, the sessions handed over in a memfd,
 * when this process cannot build a device context again; and the new process's side. */
#ifndef SSEQ_RESUME_H
#define SSEQ_RESUME_H

#include <stdbool.h>

struct server;

/* Exec this binary again with every loop's sessions handed over; returns only if that
 * failed (srv->fatal is then set). */
void resume_restart(struct server *srv);
/* The new process: the hand-over memfd named in the environment (-1 if none), and the
 * listening socket named in it. */
int resume_handover_fd(void);
int resume_listen_fd(int in);
/* Take over the sessions (after server_init; it then says how long the reset took in
 * all) and close in. *owns_socket says whether the first process made the socket file:
 * the caller then takes it over (server_own_socket), so that server_finish unlinks it as
 * the first process would have. */
int resume_adopt(struct server *srv, int in, bool *owns_socket);

#endif
