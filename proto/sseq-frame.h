/* The frame around every message on the wire, defined once for both ends: a 4-byte
 * little-endian length, then that many bytes of one packed message, at most FRAME_MAX
 * (sseq(7), WIRE PROTOCOL; the values come from sseq.proto's FrameLimits). */
#ifndef SSEQ_FRAME_H
#define SSEQ_FRAME_H

#include <stdint.h>

#include "sseq.pb-c.h"

#define FRAME_HEADER ((uint32_t)SSEQ__FRAME_LIMITS__FRAME_HEADER_SIZE)
#define FRAME_MAX ((uint32_t)SSEQ__FRAME_LIMITS__MAX_FRAME_SIZE)

static inline void frame_put_len(uint8_t *p, uint32_t len)
{
	p[0] = (uint8_t)len;
	p[1] = (uint8_t)(len >> 8);
	p[2] = (uint8_t)(len >> 16);
	p[3] = (uint8_t)(len >> 24);
}

static inline uint32_t frame_get_len(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
