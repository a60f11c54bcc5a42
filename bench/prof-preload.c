/* An LD_PRELOAD sampling profiler of one thread, for machines without perf: where a
 * process's main thread (sseqd's loop) spends its CPU time. A timer on the thread's own
 * CPU clock sends SIGPROF every $SSEQ_PROF_US microseconds of its CPU time (default 50);
 * the handler keeps the interrupted call stack. The kernel checks CPU-clock timers at its
 * tick (250 or 1000 a second), which caps the samples; $SSEQ_PROF_CLOCK=wall samples on
 * the monotonic clock instead, at the period asked, idle time included (the thread's
 * waits then show as samples in epoll_wait and the like). Time in a system call shows as the libc
 * wrapper it sits in, with its callers above it. At exit the stacks go to $SSEQ_PROF_OUT,
 * one sample a line, each frame as OBJECT+0xOFFSET[:SYMBOL] (SYMBOL only where dladdr
 * knows it: bench/prof-report.py names the rest with addr2line against the same build).
 * Measurement only: backtrace() in a signal handler is not async-signal-safe in theory.
 * Build: cc -O2 -shared -fPIC -o prof-preload.so bench/prof-preload.c -lrt */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PROF_FRAMES 24
#define PROF_MAX 200000

struct prof_sample {
	int n;
	void *pc[PROF_FRAMES];
};

static struct prof_sample *prof_ring;
static volatile unsigned prof_n;
static timer_t prof_timer;
static int prof_on;

static void prof_on_signal(int sig, siginfo_t *si, void *uc)
{
	unsigned i = prof_n;

	(void)sig, (void)si, (void)uc;
	if (i >= PROF_MAX)
		return;
	prof_ring[i].n = backtrace(prof_ring[i].pc, PROF_FRAMES);
	prof_n = i + 1;
}

__attribute__((constructor)) static void prof_start(void)
{
	const char *out = getenv("SSEQ_PROF_OUT"), *us = getenv("SSEQ_PROF_US");
	long period_us = us && *us ? atol(us) : 50;
	struct sigaction sa = {.sa_sigaction = prof_on_signal, .sa_flags = SA_SIGINFO | SA_RESTART};
	struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGPROF};
	struct itimerspec its = {0};
	void *warm[2];
	clockid_t clock;

	if (!out || !*out || period_us <= 0)
		return;
	prof_ring = calloc(PROF_MAX, sizeof(*prof_ring));
	if (!prof_ring)
		return;
	backtrace(warm, 2); /* loads the unwinder outside the handler */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, NULL);
	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (getenv("SSEQ_PROF_CLOCK") && strcmp(getenv("SSEQ_PROF_CLOCK"), "wall") == 0)
		clock = CLOCK_MONOTONIC;
	else
		pthread_getcpuclockid(pthread_self(), &clock);
	if (timer_create(clock, &ev, &prof_timer) < 0) {
		perror("prof-preload: timer_create");
		return;
	}
	its.it_value.tv_nsec = its.it_interval.tv_nsec = period_us * 1000;
	timer_settime(prof_timer, 0, &its, NULL);
	prof_on = 1;
}

__attribute__((destructor)) static void prof_stop(void)
{
	const char *out = getenv("SSEQ_PROF_OUT");
	FILE *f;

	if (!prof_on)
		return;
	timer_delete(prof_timer);
	prof_on = 0;
	f = fopen(out, "w");
	if (!f)
		return;
	fprintf(f, "# samples=%u period_us=%s clock=%s\n", prof_n,
		getenv("SSEQ_PROF_US") ? getenv("SSEQ_PROF_US") : "50",
		getenv("SSEQ_PROF_CLOCK") ? getenv("SSEQ_PROF_CLOCK") : "cpu");
	for (unsigned i = 0; i < prof_n; i++) {
		/* Frame 0 is the handler, frame 1 the signal trampoline. */
		for (int k = 2; k < prof_ring[i].n; k++) {
			Dl_info di;
			const char *obj = "?";
			unsigned long off = (unsigned long)prof_ring[i].pc[k];

			/* A return address points after its call: step back into the call. */
			if (k > 2)
				off -= 1;
			if (dladdr((void *)off, &di) && di.dli_fname) {
				obj = strrchr(di.dli_fname, '/') ? strrchr(di.dli_fname, '/') + 1
								 : di.dli_fname;
				off -= (unsigned long)di.dli_fbase;
				fprintf(f, "%s%s+0x%lx%s%s", k > 2 ? " " : "", obj, off,
					di.dli_sname ? ":" : "", di.dli_sname ? di.dli_sname : "");
			} else
				fprintf(f, "%s?+0x%lx", k > 2 ? " " : "", off);
		}
		fputc('\n', f);
	}
	fclose(f);
}
