/* Backpressure's lists: a session stopped by a full stream window waits on that stream's
 * list, one paused for another cause (its turn's frames used up, the in-flight cap, a
 * restart in place) on the resume list; the server's turn resumes them (server.c). */
#include "pause.h"

#include "server.h"
#include "session.h"

/* Off its stream's list (it may be on a detached one being resumed: its pprev says). */
static void pause_unblock(struct server *srv, struct session_pause *p)
{
	if (!p->blocked_pprev)
		return;
	*p->blocked_pprev = p->blocked_next;
	if (p->blocked_next)
		session_pause(p->blocked_next)->blocked_pprev = p->blocked_pprev;
	if (p->blocked_stream < SEQ_MAX_STREAMS && !srv->blocked[p->blocked_stream])
		srv->blocked_mask &= ~(1ull << p->blocked_stream);
	p->blocked_next = NULL;
	p->blocked_pprev = NULL;
}

static void pause_unresume(struct session_pause *p)
{
	if (!p->resume_pprev)
		return;
	*p->resume_pprev = p->resume_next;
	if (p->resume_next)
		session_pause(p->resume_next)->resume_pprev = p->resume_pprev;
	p->resume_next = NULL;
	p->resume_pprev = NULL;
	p->resume = false;
}

void pause_block(struct server *srv, struct session *s)
{
	/* ops_submit set blocked_stream to the stream seq_submit named with its -EAGAIN;
	 * SEQ_MAX_STREAMS (none named) waits for any completion. */
	struct session_pause *p = session_pause(s);
	struct session **head;

	pause_unblock(srv, p);
	p->blocked = true;
	head = &srv->blocked[p->blocked_stream];
	p->blocked_next = *head;
	if (*head)
		session_pause(*head)->blocked_pprev = &p->blocked_next;
	*head = s;
	p->blocked_pprev = head;
	if (p->blocked_stream < SEQ_MAX_STREAMS)
		srv->blocked_mask |= 1ull << p->blocked_stream;
}

void pause_resume(struct server *srv, struct session *s)
{
	struct session_pause *p = session_pause(s);

	/* Not now: this runs inside the sequencer's done callback. */
	if (p->resume)
		return;
	p->resume = true;
	p->resume_next = srv->resume;
	if (srv->resume)
		session_pause(srv->resume)->resume_pprev = &p->resume_next;
	srv->resume = s;
	p->resume_pprev = &srv->resume;
}

void pause_forget(struct server *srv, struct session *s)
{
	struct session_pause *p = session_pause(s);

	pause_unblock(srv, p);
	pause_unresume(p);
	p->blocked = false;
}
