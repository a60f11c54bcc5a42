/* Buffers and slices: a client's handles on the core's buffers (Alloc, Free, Slice), the
 * device memory they count against --client-memory-limit until it goes back, and their
 * release when the session goes. */
#include "buffer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "handles.h"
#include "out.h"
#include "outcome.h"
#include "session-limits.h"
#include "session.h"
#include "sseq-utf8.h"

/* The highest index the client may name: its session's handle limit. */
static uint32_t buffer_max_name(struct session *s)
{
	return handles_name_max(session_server(s)->opts.account.client_handles);
}

int buffer_new(struct session *s, struct seq_buffer *b, const char *label, uint64_t memory,
	uint64_t name, uint64_t *handle)
{
	struct sbuf *sb = calloc(1, sizeof(*sb));
	int r;

	if (!sb)
		return -ENOMEM;
	sb->buf = b;
	sb->owner = s;
	/* Cut at a character: half of one would make the label invalid UTF-8 again. */
	utf8_copy(sb->label, sizeof(sb->label), label ? label : "");
	if (name) {
		sb->handle = name;
		r = handles_claim(session_handles(s), HANDLE_BUFFER, sb, name, buffer_max_name(s));
	} else {
		r = handles_new(session_handles(s), HANDLE_BUFFER, sb, &sb->handle);
	}
	if (r < 0) {
		free(sb);
		return r;
	}
	b->user = (uint64_t)(uintptr_t)sb;
	b->owner = session_id(s);
	*handle = sb->handle;
	/* A base (an allocation, a module's global) is one of the session's buffers while its
	 * handle lasts; a slice is none. */
	account_take(s,
		&(struct account_rec){
			.amount = {[ACCOUNT_MEMORY] = memory, [ACCOUNT_BUFFERS] = !b->base}},
		&sb->held);
	return 0;
}

/* A base's memory went back (the core's gone hook): it counts against its session's
 * --client-memory-limit no more. The record and a ref on the session lived until now. */
static void buffer_gone(void *arg)
{
	struct sbuf *sb = arg;
	struct session *s = sb->owner;

	account_release(s, &sb->held);
	free(sb);
	session_unref(s);
}

void buffer_release(struct session *s, struct sbuf *sb)
{
	struct seq_buffer *b = sb->buf;

	b->user = 0;
	if (!b->base) {
		/* a handle: its bytes are memory, counted as long as it is held */
		account_release_slot(s, &sb->held, ACCOUNT_BUFFERS);
		if (!b->adopted) {
			/* A freed base still holds its device memory while work uses it or
			 * slices name it: it counts until the core hands that memory back (at
			 * once when idle). */
			sb->buf = NULL;
			session_ref(s);
			seq_buffer_on_gone(b, buffer_gone, sb);
			seq_buffer_free(session_server(s)->seq, b);
			return;
		}
	}
	/* A slice holds none; a module's global is the module's memory, held until now. */
	account_release(s, &sb->held);
	seq_buffer_free(session_server(s)->seq, b);
	free(sb);
}

/* Look up a buffer and check [off, off + len) lies in it. */
int buffer_range(struct session *s, uint64_t handle, uint64_t off, uint64_t len, const char *what,
	struct sbuf **out)
{
	struct sbuf *sb = handles_lookup(session_handles(s), handle, HANDLE_BUFFER);

	if (!sb) {
		char kind[32];

		snprintf(kind, sizeof(kind), "%s buffer", what);
		return outcome_unknown_handle(s, handle, kind);
	}
	if (off > sb->buf->size || len > sb->buf->size - off)
		return outcome_error(s, -ERANGE,
			"%s range [%" PRIu64 ", +%" PRIu64 ") outside buffer of %" PRIu64 " bytes",
			what, off, len, sb->buf->size);
	*out = sb;
	return 0;
}

/* A client's name for a new buffer or slice (0: none), checked before anything else: one
 * it cannot be is refused, and not taken. */
static int buffer_check_name(struct session *s, uint64_t name)
{
	const uint32_t max = buffer_max_name(s);

	switch (name ? handles_check_name(session_handles(s), name, max) : 0) {
	case 0:
		return 0;
	case -EEXIST:
		return outcome_error(s, -EINVAL, "handle %#" PRIx64 " is in use", name);
	default:
		return outcome_error(s, -EINVAL,
			"handle %#" PRIx64 " cannot be named by a client: it must have bit 31 "
			"set, an index from 1 to %" PRIu32 " (--client-handle-limit) in bits "
			"0..30, a generation in bits 32..46 and bits 47..63 zero",
			name, max);
	}
}

/* A request that named `name` (checked, 0: none) was refused with `outcome`: the name is
 * held as refused, so that the requests the client sent using it before this Reply came
 * fail for the same reason (outcome_unknown_handle). Returns outcome. */
static int buffer_refuse_name(struct session *s, uint64_t name, const char *req, int outcome)
{
	char text[HANDLES_REFUSED_MAX];

	if (!name || outcome == 0)
		return outcome;
	snprintf(text, sizeof(text), "its %s was refused: %s", req, outcome_message(outcome));
	/* Out of memory for it: the name stays unknown, which its uses say instead. */
	(void)handles_refuse(session_handles(s), name, buffer_max_name(s), text);
	return outcome;
}

static int buffer_alloc(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Alloc *a = rq->alloc;
	struct seq_buffer *b;
	uint64_t handle;
	int r;

	if (a->size == 0 || a->size > SESSION_MAX_ALLOC)
		return outcome_error(
			s, -EINVAL, "alloc size %" PRIu64 " out of range (1 .. 2^40)", a->size);
	if ((r = outcome_check_text(s, "Alloc.label", a->label)))
		return r;
	if ((r = account_check(s,
		     &(struct account_rec){
			     .amount = {[ACCOUNT_HANDLES] = 1, [ACCOUNT_MEMORY] = a->size}},
		     "alloc of %" PRIu64 " bytes", a->size)))
		return r;
	r = seq_buffer_alloc(session_server(s)->seq, a->size, &b);
	/* The backend's own errno: out of memory, or an error it reported (the size was
	 * checked above). */
	if (r < 0)
		return outcome_error(
			s, r, "cannot allocate %" PRIu64 " bytes: %s", a->size, strerror(-r));
	if (buffer_new(s, b, a->label, a->size, a->handle, &handle) < 0) {
		seq_buffer_free(session_server(s)->seq, b);
		return outcome_error(s, -ENOMEM, "out of memory");
	}
	out_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", handle, NULL, NULL);
	return 0;
}

int buffer_req_alloc(struct session *s, const Sseq__Request *rq)
{
	int r = buffer_check_name(s, rq->alloc->handle);

	if (r)
		return r;
	return buffer_refuse_name(s, rq->alloc->handle, "Alloc", buffer_alloc(s, rq));
}

int buffer_req_free(struct session *s, const Sseq__Request *rq)
{
	struct handle_table *t = session_handles(s);
	uint64_t h = rq->free->buffer;
	struct sbuf *sb = handles_lookup(t, h, HANDLE_BUFFER);

	/* Lost in a device reset, or a name whose Alloc was refused: nothing behind it. */
	if (!sb && (handles_lost(t, h) || handles_lookup(t, h, HANDLE_REFUSED))) {
		handles_drop(t, h);
		out_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
		return 0;
	}
	if (!sb)
		return outcome_unknown_handle(s, h, "buffer");
	handles_drop(t, h);
	buffer_release(s, sb); /* the sequencer defers the memory until it is idle (I5) */
	out_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

static int buffer_slice(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Slice *sl = rq->slice;
	struct sbuf *sb = handles_lookup(session_handles(s), sl->buffer, HANDLE_BUFFER);
	struct seq_buffer *b;
	uint64_t handle;
	int r;

	if (!sb)
		return outcome_unknown_handle(s, sl->buffer, "buffer");
	if ((r = outcome_check_text(s, "Slice.label", sl->label)))
		return r;
	if (sl->length == 0 || sl->offset > sb->buf->size ||
		sl->length > sb->buf->size - sl->offset)
		return outcome_error(s, -ERANGE,
			"slice [%" PRIu64 ", +%" PRIu64 ") outside buffer of %" PRIu64 " bytes",
			sl->offset, sl->length, sb->buf->size);
	if ((r = account_check(s, ACCOUNT_ONE_HANDLE, "slice")))
		return r;
	/* The range was checked above: only memory can fail, or the base was lost in a
	 * device reset this process recovered from (its handle still names it). */
	r = seq_buffer_slice(session_server(s)->seq, sb->buf, sl->offset, sl->length, &b);
	if (r == -ENXIO)
		return outcome_lost(session_server(s), r, "the buffer");
	if (r < 0)
		return outcome_error(s, -ENOMEM, "out of memory");
	if (buffer_new(s, b, sl->label, 0, sl->handle, &handle) < 0) {
		seq_buffer_free(session_server(s)->seq, b);
		return outcome_error(s, -ENOMEM, "out of memory");
	}
	out_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", handle, NULL, NULL);
	return 0;
}

int buffer_req_slice(struct session *s, const Sseq__Request *rq)
{
	int r = buffer_check_name(s, rq->slice->handle);

	if (r)
		return r;
	return buffer_refuse_name(s, rq->slice->handle, "Slice", buffer_slice(s, rq));
}

/* A session's buffer handle as it goes: slices on the first pass, bases on the second. */
static bool buffer_release_handle(struct session *s, void *obj, unsigned pass)
{
	struct sbuf *sb = obj;

	if ((pass == 0) != (sb->buf->base != NULL))
		return false;
	buffer_release(s, sb);
	return true;
}

void buffer_register_kind(void)
{
	handles_on_release(HANDLE_BUFFER, buffer_release_handle);
}
