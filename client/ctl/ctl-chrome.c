/* sseqctl trace --chrome FILE (or --perfetto FILE): the daemon's timeline of completed
 * operations as Chrome trace-event JSON, which Perfetto and chrome://tracing open. A
 * process per stream kind, a thread (track) per stream, an "X" slice per op named by
 * session, worker and kernel, a flow arrow ("s" to "f") from each producer still in the
 * timeline to the op that depended on it, and an instant where each wait was passed.
 * --session, --worker, --since and --last keep some of the operations: the file is the
 * same, with fewer of them (and the arrows between those it kept). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-json.h"
#include "ctl.h"
#include "sseq-tables.h"

/* Pages of at most 1024 entries; the daemon's ring holds 4096 (a daemon that completes
 * work faster than we page would keep us going: stop after this many). */
#define CHROME_MAX_PAGES 64
#define CHROME_TID_BASE 100 /* tids are 100 + stream: none is its process's pid */

/* A process per stream kind, numbered as the wire's StreamKind (1 compute .. 4 d2d), each
 * kind spelt as the daemon spells it in a timeline entry (sseq-tables.h, from the schema);
 * one more for a kind this sseqctl does not know. */
#define CHROME_PID_OTHER (SSEQ_STREAM_KIND_COUNT + 1)
#define CHROME_KIND_NAME(NAME, number, name) [number] = name,
static const char *const kind_names[CHROME_PID_OTHER] = {SSEQ_STREAM_KINDS(CHROME_KIND_NAME)};
#undef CHROME_KIND_NAME

struct chrome {
	Sseq__Message **pages;
	size_t npages;
	const Sseq__TimelineEntry **all; /* oldest first, as the daemon sent them */
	size_t fetched;
	const Sseq__TimelineEntry **ents; /* those the filter kept, oldest first */
	size_t n;
	const Sseq__TimelineEntry **by_point; /* sorted by (stream, seq) */
	uint64_t dropped;
	FILE *f;
	bool first; /* no event written yet */
	uint64_t flows;
	const struct ctl_chrome_filter *filter;
};

/* ---- the JSON text ---- */

static void chrome_us(FILE *f, const char *key, uint64_t ns)
{
	fprintf(f, ",\"%s\":%" PRIu64 ".%03u", key, ns / 1000, (unsigned)(ns % 1000));
}

static void chrome_event_begin(struct chrome *ch, const char *ph, const char *name)
{
	fputs(ch->first ? "\n{\"ph\":\"" : ",\n{\"ph\":\"", ch->f);
	fputs(ph, ch->f);
	fputs("\",\"name\":", ch->f);
	json_write_string(ch->f, name);
	ch->first = false;
}

/* ---- tracks ---- */

static unsigned chrome_pid(const Sseq__TimelineEntry *e)
{
	for (unsigned pid = 1; pid < CHROME_PID_OTHER; pid++)
		if (e->stream_kind && strcmp(e->stream_kind, kind_names[pid]) == 0)
			return pid;
	return CHROME_PID_OTHER;
}

static uint64_t chrome_tid(const Sseq__TimelineEntry *e)
{
	return CHROME_TID_BASE + (uint64_t)(e->at ? e->at->stream : 0);
}

static uint32_t entry_stream(const Sseq__TimelineEntry *e)
{
	return e->at ? e->at->stream : 0;
}

static uint64_t entry_seq(const Sseq__TimelineEntry *e)
{
	return e->at ? e->at->seq : 0;
}

static void chrome_where(struct chrome *ch, const Sseq__TimelineEntry *e)
{
	fprintf(ch->f, ",\"pid\":%u,\"tid\":%" PRIu64, chrome_pid(e), chrome_tid(e));
}

static void chrome_metadata(struct chrome *ch)
{
	bool pid_named[CHROME_PID_OTHER + 1] = {false};
	uint64_t stream_named = 0; /* bit x: stream x has its track (the daemon has 64) */

	for (size_t i = 0; i < ch->n; i++) {
		const Sseq__TimelineEntry *e = ch->ents[i];
		const unsigned pid = chrome_pid(e);
		const uint32_t x = entry_stream(e);
		char name[96];

		if (!pid_named[pid]) {
			pid_named[pid] = true;
			/* "compute (lanes)", "h2d copies", ..., "other" */
			if (pid == CHROME_PID_OTHER)
				snprintf(name, sizeof(name), "other");
			else
				snprintf(name, sizeof(name), "%s %s", kind_names[pid],
					pid == SSEQ__STREAM_KIND__STREAM_KIND_COMPUTE ? "(lanes)"
										      : "copies");
			chrome_event_begin(ch, "M", "process_name");
			fprintf(ch->f, ",\"pid\":%u,\"args\":{\"name\":", pid);
			json_write_string(ch->f, name);
			fputs("}}", ch->f);
			chrome_event_begin(ch, "M", "process_sort_index");
			fprintf(ch->f, ",\"pid\":%u,\"args\":{\"sort_index\":%u}}", pid, pid);
		}
		if (x < 64 && (stream_named >> x & 1))
			continue;
		if (x < 64)
			stream_named |= 1ull << x;
		snprintf(name, sizeof(name), "%s %u (stream %u)",
			e->stream_kind ? e->stream_kind : "?", e->stream_index, x);
		chrome_event_begin(ch, "M", "thread_name");
		chrome_where(ch, e);
		fputs(",\"args\":{\"name\":", ch->f);
		json_write_string(ch->f, name);
		fputs("}}", ch->f);
		chrome_event_begin(ch, "M", "thread_sort_index");
		chrome_where(ch, e);
		fprintf(ch->f, ",\"args\":{\"sort_index\":%u}}", x);
	}
}

/* ---- slices, waits and flows ---- */

static const char *status_name(int status, char *buf, size_t size)
{
	return status == SSEQ__STATUS__STATUS_OK ? "OK" : ctl_status_name(status, buf, size);
}

static void chrome_slice(struct chrome *ch, const Sseq__TimelineEntry *e)
{
	const bool exec = e->kernel && e->kernel[0];
	char name[160], buf[64];

	snprintf(name, sizeof(name), "s%" PRIu64 " %s %s", e->session,
		e->worker && e->worker[0] ? e->worker : "-", exec ? e->kernel : e->op);
	chrome_event_begin(ch, "X", name);
	fputs(",\"cat\":", ch->f);
	json_write_string(ch->f, e->op);
	chrome_us(ch->f, "ts", e->start_ns);
	chrome_us(ch->f, "dur", e->end_ns >= e->start_ns ? e->end_ns - e->start_ns : 0);
	chrome_where(ch, e);
	fprintf(ch->f, ",\"args\":{\"session\":%" PRIu64 ",\"worker\":", e->session);
	json_write_string(ch->f, e->worker);
	fprintf(ch->f, ",\"client_pid\":%u,\"kernel\":", e->pid);
	json_write_string(ch->f, exec ? e->kernel : "");
	fputs(",\"op\":", ch->f);
	json_write_string(ch->f, e->op);
	fprintf(ch->f,
		",\"stream\":%u,\"point\":\"%u:%" PRIu64 "\",\"tag\":%" PRIu64
		",\"issue_ns\":%" PRIu64 ",\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64
		",\"complete_ns\":%" PRIu64 ",\"timing\":\"%s\",\"clock_error_ns\":%" PRIu64
		",\"status\":",
		entry_stream(e), entry_stream(e), entry_seq(e), e->tag, e->issue_ns, e->start_ns,
		e->end_ns, e->complete_ns,
		e->timing == SSEQ__TIMELINE_TIMING__TIMELINE_TIMING_DEVICE ? "device" : "observed",
		e->clock_error_ns);
	json_write_string(ch->f, status_name(e->status, buf, sizeof(buf)));
	fputs(",\"waits\":[", ch->f);
	for (size_t i = 0; i < e->n_waits; i++) {
		const Sseq__TimelineWait *w = e->waits[i];

		fprintf(ch->f, "%s{\"producer\":\"%u:%" PRIu64 "\",\"how\":", i ? "," : "",
			w->producer ? w->producer->stream : 0, w->producer ? w->producer->seq : 0);
		json_write_string(ch->f, w->how);
		fputc('}', ch->f);
	}
	fprintf(ch->f, "],\"waits_dropped\":%u}}", e->waits_dropped);
}

static int point_cmp(const void *a, const void *b)
{
	const Sseq__TimelineEntry *x = *(const Sseq__TimelineEntry *const *)a;
	const Sseq__TimelineEntry *y = *(const Sseq__TimelineEntry *const *)b;

	if (entry_stream(x) != entry_stream(y))
		return entry_stream(x) < entry_stream(y) ? -1 : 1;
	if (entry_seq(x) != entry_seq(y))
		return entry_seq(x) < entry_seq(y) ? -1 : 1;
	return 0;
}

static const Sseq__TimelineEntry *chrome_find(const struct chrome *ch, const Sseq__Point *p)
{
	Sseq__TimelineEntry key = SSEQ__TIMELINE_ENTRY__INIT;
	Sseq__Point at = SSEQ__POINT__INIT;
	const Sseq__TimelineEntry *k = &key, *const * hit;

	if (!p || !ch->n)
		return NULL;
	at.stream = p->stream;
	at.seq = p->seq;
	key.at = &at;
	hit = bsearch(&k, ch->by_point, ch->n, sizeof(*ch->by_point), point_cmp);
	return hit ? *hit : NULL;
}

/* The middle of a slice: where a flow binds to it, whatever touches its ends. */
static uint64_t mid_ns(const Sseq__TimelineEntry *e)
{
	return e->start_ns + (e->end_ns >= e->start_ns ? (e->end_ns - e->start_ns) / 2 : 0);
}

/* Each wait: an instant on the consumer's track where it started, and a flow from the
 * producer's slice to the consumer's when the producer is in the timeline too. */
static void chrome_waits(struct chrome *ch, const Sseq__TimelineEntry *e)
{
	for (size_t i = 0; i < e->n_waits; i++) {
		const Sseq__TimelineWait *w = e->waits[i];
		const Sseq__TimelineEntry *prod = chrome_find(ch, w->producer);
		const bool legacy = w->how && strcmp(w->how, "legacy") == 0;
		char name[96], point[48];

		snprintf(point, sizeof(point), "%u:%" PRIu64, w->producer ? w->producer->stream : 0,
			w->producer ? w->producer->seq : 0);
		snprintf(name, sizeof(name), "%s %s", legacy ? "MISSING WAIT (legacy)" : w->how,
			point);
		chrome_event_begin(ch, "i", name);
		fputs(",\"cat\":\"wait\",\"s\":\"t\"", ch->f);
		chrome_us(ch->f, "ts", e->start_ns);
		chrome_where(ch, e);
		fputs(",\"args\":{\"producer\":", ch->f);
		json_write_string(ch->f, point);
		fputs(",\"how\":", ch->f);
		json_write_string(ch->f, w->how);
		fputs("}}", ch->f);
		if (!prod)
			continue;
		ch->flows++;
		chrome_event_begin(ch, "s", w->how);
		fprintf(ch->f, ",\"cat\":\"dependency\",\"id\":%" PRIu64, ch->flows);
		chrome_us(ch->f, "ts", mid_ns(prod));
		chrome_where(ch, prod);
		fputc('}', ch->f);
		chrome_event_begin(ch, "f", w->how);
		fprintf(ch->f, ",\"cat\":\"dependency\",\"bp\":\"e\",\"id\":%" PRIu64, ch->flows);
		chrome_us(ch->f, "ts", mid_ns(e));
		chrome_where(ch, e);
		fputc('}', ch->f);
	}
}

/* ---- fetching ---- */

static int chrome_fetch(struct ctl *c, struct chrome *ch)
{
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions o = SSEQ__TRACE_OPTIONS__INIT;
	size_t total = 0;
	int r = 0;

	ch->pages = calloc(CHROME_MAX_PAGES, sizeof(*ch->pages));
	if (!ch->pages)
		return -ENOMEM;
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_TIMELINE;
	q.trace = &o;
	while (ch->npages < CHROME_MAX_PAGES) {
		Sseq__Message *m = NULL;
		const Sseq__QueryResult *res;

		r = ctl_query(c, &q, &m);
		if (r < 0)
			return r;
		ch->pages[ch->npages++] = m;
		res = m->query_result;
		total += res->n_timeline;
		/* Later pages: what completed meanwhile pushed out of the ring. */
		ch->dropped += res->timeline_dropped;
		if (!res->timeline_next)
			break;
		o.since_seq = res->timeline_next;
	}
	ch->all = calloc(total + 1, sizeof(*ch->all));
	ch->ents = calloc(total + 1, sizeof(*ch->ents));
	ch->by_point = calloc(total + 1, sizeof(*ch->by_point));
	if (!ch->all || !ch->ents || !ch->by_point)
		return -ENOMEM;
	for (size_t p = 0; p < ch->npages; p++) {
		const Sseq__QueryResult *res = ch->pages[p]->query_result;

		for (size_t i = 0; i < res->n_timeline; i++)
			ch->all[ch->fetched++] = res->timeline[i];
	}
	return 0;
}

static void chrome_free(struct chrome *ch)
{
	for (size_t p = 0; p < ch->npages; p++)
		sseq__message__free_unpacked(ch->pages[p], NULL);
	free(ch->pages);
	free(ch->all);
	free(ch->ents);
	free(ch->by_point);
}

/* ---- the filter ---- */

static bool chrome_matches(const struct ctl_chrome_filter *f, const Sseq__TimelineEntry *e)
{
	if (f->session && e->session != f->session)
		return false;
	return !f->worker || strcmp(e->worker ? e->worker : "", f->worker) == 0;
}

/* Keeps, oldest first still, the entries of the session and worker asked for, then of
 * those the ones that ended in the time asked for: --last counts back from the newest
 * end among the session's and worker's own, so "the last second of gw3's work" is that
 * even when others went on after it. */
static void chrome_filter(struct chrome *ch, const struct ctl_chrome_filter *f)
{
	uint64_t newest = 0, cutoff;
	size_t n = 0;

	ch->n = 0;
	for (size_t i = 0; i < ch->fetched; i++) {
		if (!chrome_matches(f, ch->all[i]))
			continue;
		if (ch->all[i]->end_ns > newest)
			newest = ch->all[i]->end_ns;
		ch->ents[ch->n++] = ch->all[i];
	}
	cutoff = f->have_since ? f->since_ns : 0;
	if (f->have_last && newest > f->last_ns && newest - f->last_ns > cutoff)
		cutoff = newest - f->last_ns;
	n = 0;
	for (size_t i = 0; i < ch->n; i++)
		if (ch->ents[i]->end_ns >= cutoff)
			ch->ents[n++] = ch->ents[i];
	ch->n = n;
}

/* The filter as the command line gave it, for the summary and the file. */
static void chrome_filter_text(const struct ctl_chrome_filter *f, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	if (f->session)
		len += (size_t)snprintf(buf + len, size - len, " --session %" PRIu64, f->session);
	if (f->worker && len < size)
		len += (size_t)snprintf(buf + len, size - len, " --worker %s", f->worker);
	if (f->have_since && len < size)
		len += (size_t)snprintf(
			buf + len, size - len, " --since %" PRIu64, f->since_ns / 1000000);
	if (f->have_last && len < size)
		snprintf(buf + len, size - len, " --last %" PRIu64, f->last_ns / 1000000);
}

/* Nothing matched: what the timeline does hold, so the next try can. */
static void chrome_say_what_there_is(const struct chrome *ch)
{
	enum { SHOWN = 8 };
	const Sseq__TimelineEntry *seen[SHOWN];
	size_t nseen = 0, more = 0;
	uint64_t first = UINT64_MAX, last = 0;

	for (size_t i = 0; i < ch->fetched; i++) {
		const Sseq__TimelineEntry *e = ch->all[i];
		size_t k = 0;

		while (k < nseen &&
			!(seen[k]->session == e->session &&
				strcmp(seen[k]->worker ? seen[k]->worker : "",
					e->worker ? e->worker : "") == 0))
			k++;
		if (k == nseen && nseen < SHOWN)
			seen[nseen++] = e;
		else if (k == nseen)
			more++;
		if (e->start_ns < first)
			first = e->start_ns;
		if (e->end_ns > last)
			last = e->end_ns;
	}
	if (!ch->fetched)
		return;
	fprintf(stderr,
		"sseqctl: the timeline holds %zu operations, %.3f s to %.3f s after the "
		"daemon started, of",
		ch->fetched, (double)first / 1e9, (double)last / 1e9);
	for (size_t k = 0; k < nseen; k++)
		fprintf(stderr, "%s session %" PRIu64 " (worker %s)", k ? "," : "",
			seen[k]->session,
			seen[k]->worker && seen[k]->worker[0] ? seen[k]->worker : "-");
	fprintf(stderr, more ? " and more\n" : "\n");
}

static int chrome_write(struct chrome *ch, const char *path)
{
	size_t device = 0;
	int r = 0;

	ch->f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	if (!ch->f)
		return -errno;
	ch->first = true;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", ch->f);
	chrome_metadata(ch);
	for (size_t i = 0; i < ch->n; i++) {
		chrome_slice(ch, ch->ents[i]);
		chrome_waits(ch, ch->ents[i]);
		device += ch->ents[i]->timing == SSEQ__TIMELINE_TIMING__TIMELINE_TIMING_DEVICE;
	}
	fprintf(ch->f,
		"\n],\"otherData\":{\"source\":\"sseqctl trace --chrome\",\"operations\":%zu,"
		"\"device_timed\":%zu,\"flows\":%" PRIu64 ",\"dropped\":%" PRIu64
		",\"fetched\":%zu",
		ch->n, device, ch->flows, ch->dropped, ch->fetched);
	if (ch->filter) {
		char text[256];

		/* What a reader (python3 -m sseq.timeline) says the picture leaves out. */
		chrome_filter_text(ch->filter, text, sizeof(text));
		fputs(",\"filter\":", ch->f);
		json_write_string(ch->f, text[0] ? text + 1 : "");
	}
	fputs("}}\n", ch->f);
	if (fflush(ch->f) != 0 || ferror(ch->f))
		r = -errno ? -errno : -EIO;
	if (ch->f != stdout && fclose(ch->f) != 0 && r == 0)
		r = -errno;
	ch->f = NULL;
	return r;
}

int ctl_chrome(struct ctl *c, const char *path, uint32_t max_entries,
	const struct ctl_chrome_filter *filter)
{
	static const struct ctl_chrome_filter none = {0};
	struct chrome ch = {0};
	char text[256];
	int r;

	if (!filter)
		filter = &none;
	chrome_filter_text(filter, text, sizeof(text));
	ch.filter = text[0] ? filter : NULL;
	if (c->daemon_minor < 4) {
		snprintf(c->err, sizeof(c->err),
			"sseqd is too old for trace --chrome: it speaks protocol %u.%u, and the "
			"timeline came with %d.4; upgrade sseqd",
			SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR, c->daemon_minor,
			SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR);
		return -EPROTONOSUPPORT;
	}
	/* All of it, filtered here: when nothing matches, what is there can be named. */
	r = chrome_fetch(c, &ch);
	if (r == 0) {
		chrome_filter(&ch, filter);
		/* -n: the newest N operations. */
		if (max_entries && ch.n > max_entries) {
			memmove(ch.ents, ch.ents + (ch.n - max_entries),
				max_entries * sizeof(*ch.ents));
			ch.n = max_entries;
		}
		memcpy(ch.by_point, ch.ents, ch.n * sizeof(*ch.ents));
		qsort(ch.by_point, ch.n, sizeof(*ch.by_point), point_cmp);
		r = chrome_write(&ch, path);
		if (r < 0)
			snprintf(c->err, sizeof(c->err), "cannot write %s: %s", path, strerror(-r));
	}
	if (r == 0 && ch.filter)
		fprintf(stderr,
			"sseqctl: %zu of %zu operations (%s), %" PRIu64
			" dependency arrows%s written to %s\n",
			ch.n, ch.fetched, text + 1, ch.flows,
			ch.dropped ? " (some went by while paging)" : "", path);
	else if (r == 0)
		fprintf(stderr,
			"sseqctl: %zu operations, %" PRIu64 " dependency arrows%s written to %s\n",
			ch.n, ch.flows, ch.dropped ? " (some went by while paging)" : "", path);
	if (r == 0 && ch.filter && !ch.n)
		chrome_say_what_there_is(&ch);
	chrome_free(&ch);
	return r;
}
