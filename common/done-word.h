/* A D2H's done word (protocol 1.10, CopyD2H.done_word) or an Await's (1.13,
 * Await.done_word), as the daemon and libsseq both touch it: an 8-byte word of the
 * client's staging arena, shared by the two processes.
 *
 * The daemon writes the request's tag there once the copy's bytes are in place (the
 * awaited buffer is complete), where
 * the word holds 0 (a client watching it, spinning) or DONE_WORD_SLEEPING (protocol
 * 1.12: a client asleep until the tag comes); in the second case it then wakes the
 * futex on the word's upper half, on which that client sleeps. Any other value
 * (DONE_WORD_UNWATCHED: a client not watching) is left alone, and the Completion
 * answers. Where the daemon answers by a Completion (protocol 1.12: the tag did not go
 * in: a failure, a copy whose word its backend does not write, a client not watching
 * yet), it first puts DONE_WORD_REFUSED over 0, the unwatched or the sleeping mark, and
 * wakes a sleeper: so a client that looks at its word, arms it or sleeps on it later
 * learns that only its socket will answer. The upper half: a tag's is 0 below 2^32 and
 * never 0xfffffffe or 0xffffffff, so the futex's value check tells the sleeping mark
 * from any tag and from the refusal. Header only: both sides inline it. */
#ifndef SSEQ_DONE_WORD_H
#define SSEQ_DONE_WORD_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DONE_WORD_UNWATCHED UINT64_MAX
#define DONE_WORD_SLEEPING (UINT64_MAX - 1)
#define DONE_WORD_REFUSED (UINT64_C(0xfffffffe) << 32)

/* The word's upper 32 bits, where the futex is. */
static inline uint32_t *done_word_futex(_Atomic uint64_t *word)
{
	return (uint32_t *)(void *)word + (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 1 : 0);
}

/* Wake whoever sleeps on the word (a shared futex: the word is in memory two processes
 * map). Never blocks. */
static inline void done_word_wake(_Atomic uint64_t *word)
{
	syscall(SYS_futex, done_word_futex(word), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The daemon's write without the wake-up: the tag, where the word holds 0 or the sleeping
 * mark; release, so that the bytes before it are seen with it. 0: the word held
 * something else; 1: written; 2: written over the sleeping mark, whose sleeper the
 * caller wakes (done_word_wake). */
static inline int done_word_put(_Atomic uint64_t *word, uint64_t tag)
{
	uint64_t seen = 0;

	if (atomic_compare_exchange_strong_explicit(
		    word, &seen, tag, memory_order_release, memory_order_relaxed))
		return 1;
	if (seen != DONE_WORD_SLEEPING ||
		!atomic_compare_exchange_strong_explicit(
			word, &seen, tag, memory_order_release, memory_order_relaxed))
		return 0;
	return 2;
}

/* The daemon's write: done_word_put, then the sleeper woken. Whether the tag went in. */
static inline bool done_word_write(_Atomic uint64_t *word, uint64_t tag)
{
	const int r = done_word_put(word, tag);

	if (r == 2)
		done_word_wake(word);
	return r != 0;
}

/* Sleepers to wake once the thread that wrote their tags has handed its report on (a
 * sleeper woken first may take the core of the thread that still has to report, and with
 * it every other client's completion that thread carries). */
#define DONE_WAKES_MAX 32
struct done_wakes {
	_Atomic uint64_t *word[DONE_WAKES_MAX];
	unsigned n;
};

/* done_word_put, the sleeper kept in `wakes` for done_wakes_flush (woken now when full). */
static inline bool done_word_write_later(
	_Atomic uint64_t *word, uint64_t tag, struct done_wakes *wakes)
{
	const int r = done_word_put(word, tag);

	if (r == 2 && wakes->n < DONE_WAKES_MAX)
		wakes->word[wakes->n++] = word;
	else if (r == 2)
		done_word_wake(word);
	return r != 0;
}

/* The daemon's write of a request's tag (done_word_write, or done_word_write_later where
 * `wakes` is given), and *written (may be NULL) set where the tag went in: the loop
 * judges by that flag, not by the word, which a client that has the tag may at once name
 * again for its next request. Whether the tag went in. */
static inline bool done_word_deliver(
	_Atomic uint64_t *word, uint64_t tag, _Atomic bool *written, struct done_wakes *wakes)
{
	const bool in =
		wakes ? done_word_write_later(word, tag, wakes) : done_word_write(word, tag);

	if (in && written)
		atomic_store_explicit(written, true, memory_order_relaxed);
	return in;
}

static inline void done_wakes_flush(struct done_wakes *wakes)
{
	for (unsigned i = 0; i < wakes->n; i++)
		done_word_wake(wakes->word[i]);
	wakes->n = 0;
}

/* The daemon's refusal, before it sends the Completion instead: the word, at 0 or either
 * mark, becomes DONE_WORD_REFUSED, and a sleeper on it is woken to read its socket. */
static inline void done_word_refuse(_Atomic uint64_t *word)
{
	uint64_t seen = atomic_load_explicit(word, memory_order_relaxed);

	while (seen == 0 || seen == DONE_WORD_UNWATCHED || seen == DONE_WORD_SLEEPING) {
		const uint64_t was = seen;

		if (atomic_compare_exchange_weak_explicit(word, &seen, DONE_WORD_REFUSED,
			    memory_order_release, memory_order_relaxed)) {
			if (was == DONE_WORD_SLEEPING)
				done_word_wake(word);
			return;
		}
	}
}

/* The client's sleep on a word it marked DONE_WORD_SLEEPING, for at most timeout_ns: 0
 * when woken (or the word no longer held the mark), -ETIMEDOUT, or another -errno. */
static inline int done_word_sleep(_Atomic uint64_t *word, long timeout_ns)
{
	const struct timespec t = {timeout_ns / 1000000000L, timeout_ns % 1000000000L};

	if (syscall(SYS_futex, done_word_futex(word), FUTEX_WAIT,
		    (uint32_t)(DONE_WORD_SLEEPING >> 32), &t, NULL, 0) == 0)
		return 0;
	return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

#endif
