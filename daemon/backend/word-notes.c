/* The words a stream's report writes (word-notes.h): a short list, in no order (Awaits
 * on one stream name points in any order), scanned whole at each report that has any. */
#include <errno.h>
#include <stdlib.h>

#include "done-word.h"
#include "word-notes.h"

int word_notes_add(struct word_notes *wn, uint64_t seq, _Atomic uint64_t *word, uint64_t tag,
	_Atomic bool *written)
{
	if (wn->reported >= seq) {
		/* Reported, and perhaps not yet handled by the loop: with no failure on the
		 * way the bytes are in place, and the tag goes in now rather than the
		 * Completion later (an Await read just after its copy's report). */
		if (wn->failed)
			return -EALREADY;
		done_word_deliver(word, tag, written, NULL);
		return 1;
	}
	if (wn->n == wn->cap) {
		size_t cap = wn->cap ? wn->cap * 2 : 8;
		struct word_note *v = realloc(wn->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		wn->v = v;
		wn->cap = cap;
	}
	wn->v[wn->n++] = (struct word_note){seq, word, tag, written};
	return 0;
}

int word_notes_add_locked(pthread_mutex_t *mu, struct word_notes *wn, uint64_t seq,
	_Atomic uint64_t *word, uint64_t tag, _Atomic bool *written)
{
	int r;

	pthread_mutex_lock(mu);
	r = word_notes_add(wn, seq, word, tag, written);
	pthread_mutex_unlock(mu);
	return r;
}

unsigned word_notes_report(
	struct word_notes *wn, uint64_t seq, int status, struct done_wakes *wakes)
{
	unsigned written = 0;
	size_t kept = 0;

	if (seq > wn->reported)
		wn->reported = seq;
	if (status != 0)
		wn->failed = true;
	for (size_t i = 0; i < wn->n; i++) {
		const struct word_note *e = &wn->v[i];

		if (e->seq > seq)
			wn->v[kept++] = *e;
		else if (status == 0)
			written += done_word_deliver(e->word, e->tag, e->written, wakes);
	}
	wn->n = kept;
	return written;
}

void word_notes_finish(struct word_notes *wn)
{
	free(wn->v);
	*wn = (struct word_notes){0};
}
