/* Which daemons sseqctl talks to when no socket is named: every gpuN.sock in the socket
 * directory ($SSEQ_SOCKET_DIR, else /run/sseq, where sseq-enable-gpus puts one per GPU),
 * in GPU order, as nvidia-smi shows every GPU. */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

const char *ctl_socket_dir(void)
{
	const char *dir = getenv("SSEQ_SOCKET_DIR");

	return dir && *dir ? dir : SSEQ_SOCKET_DIR;
}

int ctl_gpu_socket(unsigned gpu, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/" SSEQ_SOCKET_NAME, ctl_socket_dir(), gpu);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The N of ".../gpuN.sock", or -1 for a name of another shape (gpuX.sock, gpu.sock). */
static long gpu_index(const char *path)
{
	const char *base = strrchr(path, '/');
	char *end;
	long n;

	base = base ? base + 1 : path;
	if (strncmp(base, "gpu", 3) != 0 || base[3] < '0' || base[3] > '9')
		return -1;
	n = strtol(base + 3, &end, 10);
	return strcmp(end, ".sock") == 0 ? n : -1;
}

static int gpu_order(const void *a, const void *b)
{
	long x = gpu_index(*(char *const *)a), y = gpu_index(*(char *const *)b);

	return x < y ? -1 : x > y;
}

int ctl_discover(struct ctl_sockets *out)
{
	char pattern[CTL_PATH_MAX];
	glob_t g = {0};
	int r = 0;

	*out = (struct ctl_sockets){0};
	if (snprintf(pattern, sizeof(pattern), "%s/gpu*.sock", ctl_socket_dir()) >=
		(int)sizeof(pattern))
		return -ENAMETOOLONG;
	switch (glob(pattern, 0, NULL, &g)) {
	case 0:
		break;
	case GLOB_NOMATCH:
		return 0;
	case GLOB_NOSPACE:
		return -ENOMEM;
	default:
		return -EIO;
	}
	out->path = calloc(g.gl_pathc, sizeof(*out->path));
	if (!out->path) {
		globfree(&g);
		return -ENOMEM;
	}
	for (size_t i = 0; r == 0 && i < g.gl_pathc; i++) {
		if (gpu_index(g.gl_pathv[i]) < 0)
			continue;
		if (!(out->path[out->n] = strdup(g.gl_pathv[i])))
			r = -ENOMEM;
		else
			out->n++;
	}
	globfree(&g);
	if (r < 0)
		ctl_sockets_free(out);
	else
		qsort(out->path, out->n, sizeof(*out->path), gpu_order);
	return r;
}

void ctl_sockets_free(struct ctl_sockets *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->path[i]);
	free(s->path);
	*s = (struct ctl_sockets){0};
}
