/* The request ring (RequestRing, protocol 1.15), defined once for both ends: a header of
 * SSEQ_RING_HEADER bytes in a client's staging arena, then a power of two of data bytes
 * that carry the same stream of frames as the socket (sseq(7), REQUEST RING). Counters
 * are totals since the ring was named, never reset; a byte at total t lies at data[t mod
 * size]. Each side writes only its own fields, on a cache line of their own. */
#ifndef SSEQ_RING_H
#define SSEQ_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define SSEQ_RING_HEADER 256u
#define SSEQ_RING_MIN 4096u
#define SSEQ_RING_MAX (1u << 20)

struct sseq_ring_header {
	/* The client's: bytes written to the ring (released once written). */
	_Atomic uint64_t tail;
	uint8_t client_pad[56];
	/* The daemon's: bytes taken from the ring into the session's input; and bytes read
	 * from the socket since the session began (the client compares it with what it sent
	 * there before writing to the ring again). */
	_Atomic uint64_t head;
	_Atomic uint64_t sock_read;
	uint8_t daemon_pad[48];
	/* The daemon's: 1 while its loop looks at the ring without being told; at 0 the
	 * client rings the doorbell (a frame of length 0 on the socket) after writing. */
	_Atomic uint32_t awake;
	uint8_t awake_pad[124];
};

_Static_assert(sizeof(struct sseq_ring_header) == SSEQ_RING_HEADER, "the ring's header");

/* n bytes (at most size) from p into a ring's data of `size` bytes at total `at`, in two
 * pieces where it wraps; and out of it into dst. */
static inline void sseq_ring_put(
	uint8_t *data, uint64_t size, uint64_t at, const uint8_t *p, uint64_t n)
{
	const uint64_t i = at & (size - 1), first = n < size - i ? n : size - i;

	memcpy(data + i, p, first);
	memcpy(data, p + first, n - first);
}

static inline void sseq_ring_get(
	const uint8_t *data, uint64_t size, uint64_t at, uint8_t *dst, uint64_t n)
{
	const uint64_t i = at & (size - 1), first = n < size - i ? n : size - i;

	memcpy(dst, data + i, first);
	memcpy(dst + first, data, n - first);
}

#endif
