/* Naming module functions: C++ kernels are templates and overloads, so besides its
 * symbol (the mangled name) a client may name a function by its demangled signature or,
 * where that is unique, its short name; resolved here against the module's functions,
 * listed once per module. Demangling is libstdc++'s (the Itanium ABI nvcc and hipcc use). */
#include "module.h"
#include "session.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libstdc++'s, from <cxxabi.h>: a malloc'd demangled name, or NULL (*status < 0). */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *length, int *status);

/* How many functions a refusal names before "...": it must fit a Reply's message. */
#define NAMES_SHOWN 4

static bool ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* "const T" as "T const", T a run of words ("const unsigned int*" becomes "unsigned int
 * const*"), in place (the length stays): __cxa_demangle writes the const after the type,
 * people often before it, and both sides are rewritten alike, so either spelling
 * matches. */
static void names_east_const(char *s)
{
	char *p = s;

	while ((p = strstr(p, "const "))) {
		char *type = p + 6, *end = type;
		size_t len;

		if ((p > s && (ident_char(p[-1]) || p[-1] == ':')) || !ident_char(*type)) {
			p += 5;
			continue;
		}
		while (ident_char(*end) || *end == ':' ||
			(*end == ' ' && ident_char(end[1]) && strncmp(end + 1, "const", 5) != 0))
			end++;
		len = (size_t)(end - type);
		memmove(p, type, len);
		memcpy(p + len, " const", 6);
		p += len + 6;
	}
}

/* text with its blanks dropped, but one kept between two identifier characters
 * ("unsigned int", "float const"), into out: "f(float *, int)" and "f(float*,int)" read
 * the same, and so do "const float*" and "float const*". False when it does not fit. */
static bool names_normal(const char *text, char *out, size_t size)
{
	size_t n = 0;

	for (const char *p = text; *p; p++) {
		if (isspace((unsigned char)*p)) {
			const char *next = p;

			while (isspace((unsigned char)next[1]))
				next++;
			if (n && next[1] && ident_char(out[n - 1]) && ident_char(next[1])) {
				if (n + 1 >= size)
					return false;
				out[n++] = ' ';
			}
			p = next;
			continue;
		}
		if (n + 1 >= size)
			return false;
		out[n++] = *p;
	}
	out[n] = 0;
	names_east_const(out);
	return true;
}

/* A demangled signature's name without its return type or parameters, into out:
 * "reduce<256>" of "void reduce<256>(float const*, float*, int)", "ns::scale" of
 * "ns::scale(float*, int, float)". out is "" when the shape is not one of these. */
static void names_short(const char *sig, char *out, size_t size)
{
	const char *start = sig, *open = NULL;
	int depth = 0;

	out[0] = 0;
	for (const char *p = sig; *p && !open; p++) {
		if (*p == '<')
			depth++;
		else if (*p == '>')
			depth--;
		else if (*p == '(' && depth == 0)
			open = p;
		else if (*p == ' ' && depth == 0)
			start = p + 1; /* after the return type */
	}
	if (open && open > start && (size_t)(open - start) < size) {
		memcpy(out, start, (size_t)(open - start));
		out[open - start] = 0;
	}
}

/* Whether function i of m is what `want` (normalised) names: its signature, or, for a
 * name without parameters, its short name with or without template arguments. */
static bool names_match(const struct smodule *m, size_t i, const char *want, bool is_sig)
{
	const char *shown = m->demangled[i] ? m->demangled[i] : m->names[i];
	char norm[512], base[512];
	char *lt;

	if (is_sig)
		return names_normal(shown, norm, sizeof(norm)) && strcmp(norm, want) == 0;
	if (!m->demangled[i] || !names_normal(shown, norm, sizeof(norm)))
		return false;
	names_short(norm, base, sizeof(base));
	if (strcmp(base, want) == 0)
		return true;
	lt = strchr(base, '<');
	if (lt)
		*lt = 0;
	return strcmp(base, want) == 0;
}

int smodule_list(struct server *srv, struct smodule *m)
{
	char **names = NULL;
	size_t n = 0;
	int r;

	if (m->listed)
		return m->listed < 0 ? m->listed : 0;
	if (!m->module)
		return -ENXIO;
	r = backend_module_functions(&srv->backend, m->module, &names, &n);
	if (r == 0 && n && !(m->demangled = calloc(n, sizeof(*m->demangled)))) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		r = -ENOMEM;
	}
	if (r < 0) {
		/* Out of memory may pass; the platform's answer will not. */
		if (r != -ENOMEM)
			m->listed = r;
		return r;
	}
	m->names = names;
	m->nnames = n;
	for (size_t i = 0; i < n; i++) {
		int status = 0;

		/* NULL: a C name (or one it cannot read), shown as is. */
		m->demangled[i] = __cxa_demangle(names[i], NULL, NULL, &status);
	}
	m->listed = 1;
	return 0;
}

/* Up to NAMES_SHOWN of m's functions (those matching, or all), as demangled, into out. */
static void names_some(
	const struct smodule *m, const char *want, bool is_sig, char *out, size_t size)
{
	size_t len = 0, shown = 0, total = 0;

	out[0] = 0;
	for (size_t i = 0; i < m->nnames; i++) {
		const char *name = m->demangled[i] ? m->demangled[i] : m->names[i];

		if (want && !names_match(m, i, want, is_sig))
			continue;
		total++;
		if (shown == NAMES_SHOWN || len >= size)
			continue;
		len += (size_t)snprintf(out + len, size - len, "%s%.80s", shown ? "; " : "", name);
		shown++;
	}
	if (total > shown && len < size)
		snprintf(out + len, size - len, "; and %zu more", total - shown);
}

int smodule_resolve(struct server *srv, struct smodule *m, const char *sig, const char **symbol,
	char *why, size_t size)
{
	const bool is_sig = strchr(sig, '(') != NULL;
	char want[512], some[200];
	size_t found = 0, at = 0;
	int r = smodule_list(srv, m);

	if (r == -ENOTSUP) {
		snprintf(why, size,
			"has no function '%.120s' (listing functions is not supported on this "
			"platform: name it by its symbol)",
			sig);
		return is_sig ? -ENOTSUP : -ENOENT;
	}
	if (r < 0) {
		snprintf(why, size, "has no function '%.120s' (its functions cannot be listed: %s)",
			sig, strerror(-r));
		return r == -ENOMEM || r == -ENXIO ? r : -ENOENT;
	}
	if (!names_normal(sig, want, sizeof(want)))
		return -ENOENT;
	for (size_t i = 0; i < m->nnames; i++) {
		if (names_match(m, i, want, is_sig)) {
			if (!found++)
				at = i;
		}
	}
	if (found == 1) {
		*symbol = m->names[at];
		return 0;
	}
	if (found > 1) {
		names_some(m, want, is_sig, some, sizeof(some));
		snprintf(why, size,
			"has %zu functions that '%.60s' names (%s): name one by its signature "
			"or symbol",
			found, sig, some);
		return -ENOTUNIQ;
	}
	names_some(m, NULL, false, some, sizeof(some));
	snprintf(why, size, "has no function '%.80s' (its functions: %s)", sig, some);
	return -ENOENT;
}
