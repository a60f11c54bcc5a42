/* sseqctl metrics with several daemons: their Prometheus texts merged into one
 * exposition. The text format wants each family once, its HELP and TYPE before its
 * samples and all of them together, so the daemons' texts cannot simply follow one
 * another. Families are merged by name without knowing them: one added to the daemon
 * shows up here as it is. Each daemon's samples carry its device label. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

struct family {
	char *name;
	char *help, *type; /* the first daemon's lines, with their newline; NULL if none */
	char *samples; /* every daemon's, in order */
	size_t len, cap;
};

struct ctl_metrics {
	struct family *fam; /* in the order first seen */
	size_t n, cap;
};

struct ctl_metrics *ctl_metrics_new(void)
{
	return calloc(1, sizeof(struct ctl_metrics));
}

void ctl_metrics_free(struct ctl_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->fam[i].name);
		free(m->fam[i].help);
		free(m->fam[i].type);
		free(m->fam[i].samples);
	}
	free(m->fam);
	free(m);
}

static struct family *family_get(struct ctl_metrics *m, const char *name, size_t len)
{
	struct family *f;

	for (size_t i = 0; i < m->n; i++)
		if (strlen(m->fam[i].name) == len && memcmp(m->fam[i].name, name, len) == 0)
			return &m->fam[i];
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct family *fam = realloc(m->fam, cap * sizeof(*fam));
		if (!fam)
			return NULL;
		m->fam = fam;
		m->cap = cap;
	}
	f = &m->fam[m->n];
	*f = (struct family){.name = strndup(name, len)};
	if (!f->name)
		return NULL;
	m->n++;
	return f;
}

static int family_append(struct family *f, const char *line, size_t len)
{
	if (f->len + len + 1 > f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 1024;
		char *s;
		while (cap < f->len + len + 1)
			cap *= 2;
		s = realloc(f->samples, cap);
		if (!s)
			return -ENOMEM;
		f->samples = s;
		f->cap = cap;
	}
	memcpy(f->samples + f->len, line, len);
	f->len += len;
	f->samples[f->len] = '\0';
	return 0;
}

/* Whether a sample named name (len bytes) belongs to family f: its own name, or a
 * histogram's or summary's series of it. */
static bool family_has(const struct family *f, const char *name, size_t len)
{
	static const char *const suffixes[] = {"", "_bucket", "_sum", "_count", "_created"};
	size_t flen = strlen(f->name);

	if (len < flen || memcmp(name, f->name, flen) != 0)
		return false;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (len - flen == strlen(suffixes[i]) &&
			memcmp(name + flen, suffixes[i], len - flen) == 0)
			return true;
	return false;
}

/* "# HELP name ..." or "# TYPE name ...": the family's first daemon's line is kept. */
static int metrics_comment(struct ctl_metrics *m, const char *line, size_t len, struct family **cur)
{
	const char *name = line + 7;
	size_t nlen = strcspn(name, " \n");
	bool help = strncmp(line, "# HELP ", 7) == 0;
	struct family *f;
	char **slot;

	if (!help && strncmp(line, "# TYPE ", 7) != 0)
		return 0; /* another comment: nothing a scraper needs */
	f = family_get(m, name, nlen);
	if (!f)
		return -ENOMEM;
	*cur = f;
	slot = help ? &f->help : &f->type;
	if (*slot)
		return 0;
	*slot = strndup(line, len);
	return *slot ? 0 : -ENOMEM;
}

int ctl_metrics_add(struct ctl_metrics *m, const char *text)
{
	struct family *cur = NULL;

	while (text && *text) {
		const char *end = strchr(text, '\n');
		size_t len = end ? (size_t)(end - text) + 1 : strlen(text);
		int r = 0;

		if (text[0] == '#') {
			r = metrics_comment(m, text, len, &cur);
		} else if (len > 1 || text[0] != '\n') {
			size_t nlen = strcspn(text, "{ \n");
			if (!cur || !family_has(cur, text, nlen))
				cur = family_get(m, text, nlen);
			r = cur ? family_append(cur, text, len) : -ENOMEM;
			/* A last line without its newline must not run into the next one. */
			if (r == 0 && text[len - 1] != '\n')
				r = family_append(cur, "\n", 1);
		}
		if (r < 0)
			return r;
		text += len;
	}
	return 0;
}

void ctl_metrics_print(const struct ctl_metrics *m, FILE *f)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct family *fam = &m->fam[i];

		if (fam->help)
			fputs(fam->help, f);
		if (fam->type)
			fputs(fam->type, f);
		if (fam->samples)
			fputs(fam->samples, f);
	}
	fflush(f);
}
