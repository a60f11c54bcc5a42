/* Findings, whose op and which buffer: the backend's come from its threads and are named
 * on the loop while their ops are in flight (a queue, woken like the completions); the
 * schedule checker's are named at once, inside seq_submit. */
#include "finding.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "buffer.h"
#include "handles.h"
#include "log.h"
#include "ops.h"
#include "server.h"
#include "session.h"
#include "verify.h"

void finding_init(struct finding_queue *q)
{
	pthread_mutex_init(&q->lock, NULL);
}

void finding_open(struct finding_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->open = true;
	pthread_mutex_unlock(&q->lock);
}

void finding_close(struct finding_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->open = false;
	pthread_mutex_unlock(&q->lock);
}

void finding_log(void *arg, const char *what)
{
	log_err("detector", "%s", what);
}

/* The buffer of s whose memory holds addr: a base by preference (the detectors name the
 * allocation), else a slice over it; NULL if none. */
struct finding_buffer_find {
	uint64_t addr;
	const struct sbuf *base, *slice; /* the first of each that holds addr */
};

static void finding_buffer_holds(void *obj, void *arg)
{
	struct finding_buffer_find *f = arg;
	const struct sbuf *sb = obj;

	if (!sb || !sb->buf || f->addr < sb->buf->addr || f->addr - sb->buf->addr >= sb->buf->size)
		return;
	if (!sb->buf->base) {
		if (!f->base)
			f->base = sb;
	} else if (!f->slice) {
		f->slice = sb;
	}
}

static const struct sbuf *finding_buffer_at(const struct session *s, uint64_t addr)
{
	struct finding_buffer_find f = {.addr = addr};

	if (addr)
		handles_foreach(session_handles_const(s), HANDLE_BUFFER, finding_buffer_holds, &f);
	return f.base ? f.base : f.slice;
}

/* A finding with whom it is about: "session 5 (gw3, pid 1234), kernel add, buffer 'x'
 * (handle 3): race: ...", with SSEQ_SESSION=/SSEQ_WORKER= in the journal, as the device
 * faults' lines have. s NULL: the finding as the detector wrote it. */
static void finding_log_about(const char *subsystem, const struct session *ses, const char *kernel,
	const struct sbuf *sb, const char *what, uint64_t n)
{
	const struct session_ident *s = ses ? session_ident(ses) : NULL;
	char buffer[96] = "", count[32] = "";

	if (n)
		snprintf(count, sizeof(count), " (finding %" PRIu64 ")", n);
	if (!s) {
		log_err(subsystem, "%s%s", what, count);
		return;
	}
	if (sb && sb->label[0])
		snprintf(buffer, sizeof(buffer), ", buffer '%s' (handle %" PRIu64 ")", sb->label,
			sb->handle);
	else if (sb)
		snprintf(buffer, sizeof(buffer), ", buffer handle %" PRIu64, sb->handle);
	/* A label is the client's text: no control character reaches the log. */
	for (char *c = buffer; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	log_about(LOG_LVL_ERR, subsystem, &(struct log_who){.session = s->id, .worker = s->worker},
		"session %" PRIu64 " (%s, pid %u)%s%s%s: %s%s", s->id,
		s->worker[0]	     ? s->worker
			: s->name[0] ? s->name
				     : "no name",
		s->pid, kernel && kernel[0] ? ", kernel " : "", kernel ? kernel : "", buffer, what,
		count);
}

/* The backend's finding about the op at `at` (any thread): queued for the loop, which
 * knows whose op it was. A finding is made before its op completes, and server_drain
 * names the queued ones after taking the completions but before handling them, so the
 * op is still in the in-flight table then. Past the queue's room: logged as it is. */
void finding_queue_op(void *arg, struct seq_point at, uint64_t addr, const char *what)
{
	struct server *srv = arg;
	struct finding_queue *q = &srv->found;
	bool queued = false;

	pthread_mutex_lock(&q->lock);
	if (q->open && q->n < FINDING_MAX) {
		struct finding *f = &q->ent[q->n++];

		f->at = at;
		f->addr = addr;
		snprintf(f->what, sizeof(f->what), "%s", what);
		queued = true;
		/* Under the lock: server_finish closes the handle only after it closed the
		 * queue under it. */
		if (q->n == 1)
			uv_async_send(&srv->wake);
	}
	pthread_mutex_unlock(&q->lock);
	if (!queued)
		log_err("detector", "%s", what);
}

void finding_drain(struct server *srv)
{
	struct finding_queue *q = &srv->found;
	struct finding found[FINDING_MAX];
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->n;
	memcpy(found, q->ent, n * sizeof(found[0]));
	q->n = 0;
	pthread_mutex_unlock(&q->lock);
	for (size_t i = 0; i < n; i++) {
		const struct op_rec *rec = found[i].at.seq ? ops_point_op(srv, found[i].at) : NULL;
		const struct session *s = rec ? rec->session : NULL;

		finding_log_about("detector", s, rec ? rec->what : NULL,
			s ? finding_buffer_at(s, found[i].addr) : NULL, found[i].what, 0);
	}
}

/* The checker's findings, in the journal (the first 100, then every 1000th). They are
 * made on the loop, inside seq_submit: the op is the one `submitting`, the buffer the
 * one of the access at fault. */
void finding_log_verify(void *arg, const char *what)
{
	struct server *srv = arg;
	const uint64_t n = verify_violations(srv->verify);
	const struct op_rec *rec = srv->submitting;
	const struct sbuf *sb = NULL;
	const char *kernel = NULL;
	struct verify_subject subj;

	if (n > 100 && n % 1000 != 0)
		return;
	verify_subject(srv->verify, &subj);
	if (subj.access && subj.access->buf)
		sb = (const struct sbuf *)(uintptr_t)subj.access->buf->user;
	if (subj.op && subj.op->kind == SEQ_OP_EXEC && subj.op->payload) {
		const struct op_payload *p = subj.op->payload;

		kernel = p->kernel ? p->kernel->name : p->function_name;
	}
	finding_log_about("verify", rec ? rec->session : NULL, kernel, sb, what, n);
}
