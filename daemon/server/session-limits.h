/* The bounds the parts of a session share: input and output buffering, a turn's frames,
 * allocation, modules and launches. */
#ifndef SSEQ_SESSION_LIMITS_H
#define SSEQ_SESSION_LIMITS_H

#define SESSION_READ_CHUNK 65536u
/* Frames one session may have processed per loop turn: the rest wait for the next turn
 * (srv->resume), so that every other session's requests are read in between. */
#define SESSION_TURN_FRAMES 128u
/* Every connection may hold this much input outside --max-input-memory (so small frames
 * never wait on others' large ones): at most --max-clients times this in all. */
#define SESSION_INPUT_BASE (2 * SESSION_READ_CHUNK)
/* A trace follower's unsent output past which new entries are dropped (and counted). */
#define SESSION_FOLLOW_HIGH (1u << 20)
/* Stop reading a client that does not read its replies. */
#define SESSION_OUT_HIGH (8u << 20)
#define SESSION_MAX_ALLOC (1ull << 40)
/* Each module holds device memory for its code; functions are cached up to a bound (a
 * lookup past it still works, uncached). */
#define SESSION_MAX_MODULES 64
#define SESSION_MAX_MODULE_FNS 256
#define SESSION_MAX_FN_NAME 255
/* The most blocks a thread-block cluster may have everywhere clusters run (CUDA's
 * portable cluster size). */
#define SESSION_MAX_CLUSTER 8

#endif
