/* A tiny streaming JSON writer for sseqctl --json. The caller nests begin/end pairs
 * correctly; the writer tracks commas and indentation and writes only valid JSON text,
 * whatever bytes a string holds. */
#include "ctl-json.h"

#include <inttypes.h>

#include "sseq-utf8.h"

void json_init(struct json *j, FILE *f, bool pretty)
{
	*j = (struct json){.f = f, .pretty = pretty};
	j->empty[0] = true;
}

static void json_indent(struct json *j)
{
	if (!j->pretty)
		return;
	fputc('\n', j->f);
	for (unsigned i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

void json_write_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*p < 0x20 || *p == 0x7f) {
				fprintf(f, "\\u%04x", *p);
			} else if (*p >= 0x80) {
				/* Well-formed characters pass through; anything else becomes
				 * U+FFFD, byte by byte: protobuf-c does not check that strings
				 * are UTF-8, and an older daemon cut labels mid-character. */
				size_t n = utf8_char_len((const char *)p);
				if (n)
					fwrite(p, 1, n, f);
				else
					fputs("\xef\xbf\xbd", f);
				p += n ? n - 1 : 0;
			} else {
				fputc(*p, f);
			}
		}
	}
	fputc('"', f);
}

/* Separator, indentation and key before any value. */
static void json_member(struct json *j, const char *key)
{
	if (j->depth > 0) {
		if (!j->empty[j->depth])
			fputc(',', j->f);
		json_indent(j);
	}
	j->empty[j->depth] = false;
	if (key) {
		json_write_string(j->f, key);
		fputs(j->pretty ? ": " : ":", j->f);
	}
}

static void json_open(struct json *j, const char *key, char c)
{
	json_member(j, key);
	fputc(c, j->f);
	/* Deeper nesting than sseqctl ever writes would be a bug here, not bad input. */
	if (j->depth + 1 < JSON_MAX_DEPTH)
		j->depth++;
	j->empty[j->depth] = true;
}

static void json_close(struct json *j, char c)
{
	bool was_empty = j->empty[j->depth];

	if (j->depth > 0)
		j->depth--;
	if (!was_empty)
		json_indent(j);
	fputc(c, j->f);
}

void json_object_begin(struct json *j, const char *key)
{
	json_open(j, key, '{');
}

void json_object_end(struct json *j)
{
	json_close(j, '}');
}

void json_array_begin(struct json *j, const char *key)
{
	json_open(j, key, '[');
}

void json_array_end(struct json *j)
{
	json_close(j, ']');
}

void json_string(struct json *j, const char *key, const char *value)
{
	json_member(j, key);
	if (value)
		json_write_string(j->f, value);
	else
		fputs("null", j->f);
}

void json_text(struct json *j, const char *key, const char *value)
{
	json_string(j, key, value && *value ? value : NULL);
}

void json_uint(struct json *j, const char *key, uint64_t value)
{
	json_member(j, key);
	fprintf(j->f, "%" PRIu64, value);
}

void json_bool(struct json *j, const char *key, bool value)
{
	json_member(j, key);
	fputs(value ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
	json_member(j, key);
	fputs("null", j->f);
}

void json_finish(struct json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
	j->depth = 0;
	j->empty[0] = true;
}
