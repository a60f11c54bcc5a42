/* Backpressure's lists: a session stopped by a full stream window waits on that stream's
 * list, one paused for another cause (its turn's frames used up, the in-flight cap, a
 * restart in place) on the resume list; the server's turn resumes them (server.c). */
#include "pause.h"

#include "server.h"
#include "session.h"

/* Off its stream's list (it may be on a detached one being resumed: its pprev says). */
static void pause_unblock(struct server *srv, struct session *s)
{
	if (!s->blocked_pprev)
		return;
	*s->blocked_pprev = s->blocked_next;
	if (s->blocked_next)
		s->blocked_next->blocked_pprev = s->blocked_pprev;
	if (s->blocked_stream < SEQ_MAX_STREAMS && !srv->blocked[s->blocked_stream])
		srv->blocked_mask &= ~(1ull << s->blocked_stream);
	s->blocked_next = NULL;
	s->blocked_pprev = NULL;
}

static void pause_unresume(struct session *s)
{
	if (!s->resume_pprev)
		return;
	*s->resume_pprev = s->resume_next;
	if (s->resume_next)
		s->resume_next->resume_pprev = s->resume_pprev;
	s->resume_next = NULL;
	s->resume_pprev = NULL;
	s->resume = false;
}

void pause_block(struct server *srv, struct session *s)
{
	/* ops_submit set s->blocked_stream to the stream seq_submit named with its
	 * -EAGAIN; SEQ_MAX_STREAMS (none named) waits for any completion. */
	struct session **head;

	pause_unblock(srv, s);
	s->blocked = true;
	head = &srv->blocked[s->blocked_stream];
	s->blocked_next = *head;
	if (*head)
		(*head)->blocked_pprev = &s->blocked_next;
	*head = s;
	s->blocked_pprev = head;
	if (s->blocked_stream < SEQ_MAX_STREAMS)
		srv->blocked_mask |= 1ull << s->blocked_stream;
}

void pause_resume(struct server *srv, struct session *s)
{
	/* Not now: this runs inside the sequencer's done callback. */
	if (s->resume)
		return;
	s->resume = true;
	s->resume_next = srv->resume;
	if (srv->resume)
		srv->resume->resume_pprev = &s->resume_next;
	srv->resume = s;
	s->resume_pprev = &srv->resume;
}

void pause_forget(struct server *srv, struct session *s)
{
	pause_unblock(srv, s);
	pause_unresume(s);
	s->blocked = false;
}
