/* UTF-8 as the wire wants it (proto3 strings must be UTF-8, and protobuf-c does not check),
 * defined once for both ends: the daemon refuses client text that is not, and cuts what it
 * keeps at a character boundary; sseqctl's JSON writer replaces what still is not. */
#ifndef SSEQ_UTF8_H
#define SSEQ_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* The length of the well-formed UTF-8 character at s (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one. NUL ends. */
static inline size_t utf8_char_len(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	/* The second byte's range is what rules out overlong forms and surrogates. */
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

static inline bool utf8_valid(const char *s)
{
	size_t n;

	for (; *s; s += n)
		if (!(n = utf8_char_len(s)))
			return false;
	return true;
}

/* Copies valid UTF-8 src into dst[size], cut at the last whole character that fits. */
static inline void utf8_copy(char *dst, size_t size, const char *src)
{
	size_t len = 0, n;

	if (!size)
		return;
	for (; src[len] && (n = utf8_char_len(src + len)) && len + n < size; len += n)
		;
	for (size_t i = 0; i < len; i++)
		dst[i] = src[i];
	dst[len] = '\0';
}

#endif
