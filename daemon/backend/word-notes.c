/* The words a stream's report writes (word-notes.h): a short list, in no order (Awaits
 * on one stream name points in any order), scanned whole at each report that has any. */
#include <errno.h>
#include <stdlib.h>

#include "done-word.h"
#include "word-notes.h"

int word_notes_add(struct word_notes *wn, uint64_t seq, _Atomic uint64_t *word, uint64_t tag)
{
	if (wn->reported >= seq)
		return -EALREADY;
	if (wn->n == wn->cap) {
		size_t cap = wn->cap ? wn->cap * 2 : 8;
		struct word_note *v = realloc(wn->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		wn->v = v;
		wn->cap = cap;
	}
	wn->v[wn->n++] = (struct word_note){seq, word, tag};
	return 0;
}

int word_notes_add_locked(pthread_mutex_t *mu, struct word_notes *wn, uint64_t seq,
	_Atomic uint64_t *word, uint64_t tag)
{
	int r;

	pthread_mutex_lock(mu);
	r = word_notes_add(wn, seq, word, tag);
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
	for (size_t i = 0; i < wn->n; i++) {
		const struct word_note *e = &wn->v[i];

		if (e->seq > seq)
			wn->v[kept++] = *e;
		else if (status == 0)
			written += done_word_write_later(e->word, e->tag, wakes);
	}
	wn->n = kept;
	return written;
}

void word_notes_finish(struct word_notes *wn)
{
	free(wn->v);
	*wn = (struct word_notes){0};
}
