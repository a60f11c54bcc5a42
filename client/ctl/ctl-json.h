/* A tiny streaming JSON writer for sseqctl --json: objects, arrays, strings with full
 * escaping (always valid UTF-8), and unsigned integers, written straight to a FILE. */
#ifndef SSEQ_CTL_JSON_H
#define SSEQ_CTL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
	FILE *f;
	bool pretty; /* indent two spaces a level; otherwise one line per document */
	unsigned depth;
	bool empty[JSON_MAX_DEPTH]; /* the open container has no member yet */
};

void json_init(struct json *j, FILE *f, bool pretty);
/* One JSON string (quoted, escaped; bytes that are not UTF-8 become U+FFFD) straight to f,
 * for writers of their own (trace --chrome). */
void json_write_string(FILE *f, const char *s);
/* Members of an object take a key; elements of an array and the top level pass NULL. */
void json_object_begin(struct json *j, const char *key);
void json_object_end(struct json *j);
void json_array_begin(struct json *j, const char *key);
void json_array_end(struct json *j);
/* A NULL string is written as null; json_text writes an empty one as null too (a value
 * that was not given). Bytes that are not UTF-8 become U+FFFD. */
void json_string(struct json *j, const char *key, const char *value);
void json_text(struct json *j, const char *key, const char *value);
void json_uint(struct json *j, const char *key, uint64_t value);
void json_bool(struct json *j, const char *key, bool value);
void json_null(struct json *j, const char *key);
/* Ends the document with a newline and flushes, so --follow readers see it at once. */
void json_finish(struct json *j);

#endif
