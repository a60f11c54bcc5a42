/* The sim's configuration: the --sim-delay and --inject specs parsed into a struct
 * sim_config, the check sim_create makes of any config it is given, parsed or filled in
 * by a test, and sseqd's option rows for them. */
#include "sim-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIM_DELAY_MAX_NS (3600ull * 1000000000ull)

/* -EINVAL for what sim_create cannot run: more faults than fit, a delay mode it does not know or a
 * range or script out of bounds. */
int sim_config_check(const struct sim_config *cfg)
{
	if (cfg->nfail > SIM_INJECT_MAX)
		return -EINVAL;
	for (unsigned k = 0; k <= SEQ_STREAM_D2D; k++) {
		const struct sim_delay *d = &cfg->delay[k];

		if (d->mode > SIM_DELAY_SCRIPT ||
			(d->mode == SIM_DELAY_RAND && d->lo_ns > d->hi_ns) ||
			(d->mode == SIM_DELAY_SCRIPT &&
				(d->nscript < 1 || d->nscript > SIM_SCRIPT_MAX)))
			return -EINVAL;
	}
	return 0;
}

/* One duration of [s, end): a number and a unit; a bare number takes *unit_ns when it is
 * not 0 (the unit of rand's upper bound), and only 0 may be bare otherwise. */
static int sim_parse_duration(const char *s, const char *end, uint64_t bare_unit, uint64_t *ns,
	uint64_t *unit_ns, const char **why)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
	char buf[64], *u;
	size_t len = (size_t)(end - s);
	uint64_t unit = 0;
	double v;

	if (len == 0 || len >= sizeof(buf) || *s < '0' || *s > '9') {
		*why = "expected a duration such as 2ms, 500us or 0";
		return -EINVAL;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	v = strtod(buf, &u);
	if (*u == '\0') {
		unit = bare_unit;
	} else {
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strcmp(u, units[i].name) == 0)
				unit = units[i].ns;
		if (!unit) {
			*why = "unknown unit: use ns, us, ms or s";
			return -EINVAL;
		}
	}
	if (!unit && v != 0) {
		*why = "a duration needs a unit (ns, us, ms, s)";
		return -EINVAL;
	}
	if (!isfinite(v) || v * (double)(unit ? unit : 1) > (double)SIM_DELAY_MAX_NS) {
		*why = "a delay may be at most one hour";
		return -EINVAL;
	}
	*ns = (uint64_t)llround(v * (double)unit);
	if (unit_ns)
		*unit_ns = unit;
	return 0;
}

int sim_parse_delay(struct sim_config *cfg, const char *spec, const char **why)
{
	const char *eq = strchr(spec, '='), *v, *end;
	struct sim_delay d = {0};
	size_t klen;
	int kind = -1;
	bool all = false;
	int r;

	*why = NULL;
	if (!eq) {
		*why = "expected KIND=DELAY, e.g. h2d=2ms";
		return -EINVAL;
	}
	klen = (size_t)(eq - spec);
	for (int k = 0; k < SEQ_STREAM_KINDS; k++) {
		const char *name = seq_stream_kind_name((enum seq_stream_kind)k);

		if (strlen(name) == klen && strncmp(spec, name, klen) == 0)
			kind = k;
	}
	all = klen == 3 && strncmp(spec, "all", 3) == 0;
	if (kind < 0 && !all) {
		*why = "unknown stream kind: use compute, h2d, d2h, d2d or all";
		return -EINVAL;
	}
	v = eq + 1;
	end = v + strlen(v);
	if (strncmp(v, "rand:", 5) == 0) {
		const char *dash = strchr(v + 5, '-');
		uint64_t unit;

		if (!dash) {
			*why = "expected rand:LO-HI, e.g. rand:0-500us";
			return -EINVAL;
		}
		d.mode = SIM_DELAY_RAND;
		r = sim_parse_duration(dash + 1, end, 0, &d.hi_ns, &unit, why);
		if (r < 0)
			return r;
		r = sim_parse_duration(v + 5, dash, unit, &d.lo_ns, NULL, why);
		if (r < 0)
			return r;
		if (d.lo_ns > d.hi_ns) {
			*why = "rand:LO-HI needs LO <= HI";
			return -EINVAL;
		}
	} else if (strncmp(v, "script:", 7) == 0) {
		d.mode = SIM_DELAY_SCRIPT;
		for (const char *s = v + 7;; s++) {
			const char *comma = strchr(s, ',');
			const char *stop = comma ? comma : end;

			if (d.nscript == SIM_SCRIPT_MAX) {
				*why = "a script holds at most 64 delays";
				return -EINVAL;
			}
			r = sim_parse_duration(s, stop, 0, &d.script_ns[d.nscript++], NULL, why);
			if (r < 0)
				return r;
			if (!comma)
				break;
			s = comma;
		}
	} else {
		d.mode = SIM_DELAY_FIXED;
		r = sim_parse_duration(v, end, 0, &d.lo_ns, NULL, why);
		if (r < 0)
			return r;
		d.hi_ns = d.lo_ns;
	}
	for (int k = 0; k <= SEQ_STREAM_D2D; k++)
		if (all || k == kind)
			cfg->delay[k] = d;
	return 0;
}

int sim_parse_inject(struct sim_config *cfg, const char *spec, const char **why)
{
	/* A bad or missing N is answered with the form the fault takes. */
	static const struct {
		const char *name, *form;
		bool on_device, lost;
	} faults[] = {
		{"fail-op", "expected fail-op=N: launch N (from 1) fails", false, false},
		{"device-fail-op",
			"expected device-fail-op=N: launch N (from 1) fails on the device, "
			"failing its stream",
			true, false},
		{"device-lost-op",
			"expected device-lost-op=N: launch N (from 1) loses the device context",
			true, true},
	};
	const char *s = NULL, *form = NULL;
	bool on_device = false, lost = false;
	uint64_t n = 0;

	*why = NULL;
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		size_t len = strlen(faults[i].name);

		if (strncmp(spec, faults[i].name, len) == 0 &&
			(spec[len] == '=' || spec[len] == '\0')) {
			s = spec + len + (spec[len] == '=');
			form = faults[i].form;
			on_device = faults[i].on_device;
			lost = faults[i].lost;
		}
	}
	if (!s) {
		*why = "unknown fault: the sim knows fail-op=N, device-fail-op=N and "
		       "device-lost-op=N";
		return -EINVAL;
	}
	if (*s == '\0') {
		*why = form;
		return -EINVAL;
	}
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || n > (UINT64_MAX - 9) / 10) {
			*why = form;
			return -EINVAL;
		}
		n = n * 10 + (uint64_t)(*s - '0');
	}
	if (n == 0) {
		*why = form;
		return -EINVAL;
	}
	if (cfg->nfail == SIM_INJECT_MAX) {
		*why = "at most 32 fail-op, device-fail-op and device-lost-op faults in all";
		return -EINVAL;
	}
	cfg->fail_op[cfg->nfail] = n;
	cfg->fail_on_device[cfg->nfail] = on_device;
	cfg->fail_lost[cfg->nfail] = lost;
	cfg->nfail++;
	return 0;
}

/* --sim-delay SPEC: every refusal says why. */
static int sim_option_delay(void *cfg, const char *arg, const char **why)
{
	int r = sim_parse_delay(cfg, arg, why);

	if (r < 0 && !*why)
		*why = "invalid";
	return r;
}

/* --inject SPEC, the sim's faults: another's (the core's) is left to its row. */
static int sim_option_inject(void *cfg, const char *arg, const char **why)
{
	int r = sim_parse_inject(cfg, arg, why);

	if (r < 0 && (!*why || strncmp(*why, "unknown fault", 13) == 0))
		return -ENOENT;
	return r;
}

const struct option_row sim_options[] = {
	{.name = "sim-delay",
		.arg = "SPEC",
		.kind = OPTION_CUSTOM,
		.parse = sim_option_delay,
		.help = "delay a stream kind in the sim: h2d=2ms, d2d=rand:0-500us, "
			"compute=script:1ms,0,5ms (repeatable)"},
	{.name = "inject",
		.arg = "SPEC",
		.kind = OPTION_CUSTOM,
		.parse = sim_option_inject,
		.values = "fail-op=N, device-fail-op=N, device-lost-op=N",
		.what = "fault",
		.help = "fault injection (repeatable)"},
	{0},
};
