/* Await's done word (protocol 1.13) on the backend's side: the words a stream's report of
 * its events writes, each once the device has reached the point it waits for. A backend
 * keeps one list per stream under that stream's lock, the loop adds to it
 * (backend_ops.point_word) and whoever reports the stream's events writes or drops the
 * entries up to the point reported, before the report goes to the completion queue. */
#ifndef SSEQ_WORD_NOTES_H
#define SSEQ_WORD_NOTES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "done-word.h"

struct word_note {
	uint64_t seq;
	_Atomic uint64_t *word;
	uint64_t tag;
	_Atomic bool *written; /* set where the tag went in; may be NULL */
};

struct word_notes {
	struct word_note *v;
	size_t n, cap;
	uint64_t reported; /* the stream reported through this point */
	bool failed; /* a report came with an error */
};

/* The report through `seq` is to write `tag` into `word` and set *written
 * (done_word_deliver): 0. Where the stream already reported through seq (the report is in
 * the completion queue or handled) and no report came with an error, that is done now: 1;
 * after an error, -EALREADY (the caller answers by a Completion). -ENOMEM. */
int word_notes_add(struct word_notes *wn, uint64_t seq, _Atomic uint64_t *word, uint64_t tag,
	_Atomic bool *written);
/* The same under `mu`, the lock the stream's reports hold (backend_ops.point_word). */
int word_notes_add_locked(pthread_mutex_t *mu, struct word_notes *wn, uint64_t seq,
	_Atomic uint64_t *word, uint64_t tag, _Atomic bool *written);

/* The stream reported through `seq` with `status`: the entries up to it are written
 * (status 0: the tag goes where the word holds 0 or the sleeping mark) or dropped (a
 * failure: the Completion answers). A sleeper on a word written is kept in `wakes` for
 * the caller to wake once it has pushed the report (done_wakes_flush). Returns how many
 * tags went in. */
unsigned word_notes_report(
	struct word_notes *wn, uint64_t seq, int status, struct done_wakes *wakes);

/* Every entry dropped and the memory freed (the stream's end; its words are not
 * written). */
void word_notes_finish(struct word_notes *wn);

#endif
