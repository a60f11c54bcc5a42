/* LoadModule's path rules. The client names a file relative to --module-dir; the daemon
 * loads only regular files whose real path (after every symlink) lies inside the real
 * --module-dir. Lexical checks come first so that an escape attempt is refused as one,
 * whether or not its target exists. */
#include "modpath.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool modpath_has_dotdot(const char *path)
{
	for (const char *c = path; *c;) {
		size_t n = strcspn(c, "/");

		if (n == 2 && c[0] == '.' && c[1] == '.')
			return true;
		c += n;
		c += *c == '/';
	}
	return false;
}

/* Whether `p` is `dir` itself or lies below it (both real paths). */
static bool modpath_inside(const char *dir, const char *p)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return p[0] == '/';
	return strncmp(p, dir, n) == 0 && (p[n] == '/' || p[n] == '\0');
}

int modpath_resolve(const char *dir, const char *path, char *out, size_t size, const char **why)
{
	char rdir[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
	const char *reason = NULL;
	struct stat sb;
	int r, n;

	if (!dir) {
		reason = "no --module-dir configured";
		r = -EPERM;
		goto out;
	}
	if (!path || !*path) {
		reason = "empty module path";
		r = -EINVAL;
		goto out;
	}
	if (path[0] == '/') {
		reason = "absolute module paths are not allowed (name a file inside --module-dir)";
		r = -EPERM;
		goto out;
	}
	if (modpath_has_dotdot(path)) {
		reason = "'..' components are not allowed in module paths";
		r = -EPERM;
		goto out;
	}
	if (!realpath(dir, rdir)) {
		r = -errno;
		reason = "--module-dir cannot be resolved";
		goto out;
	}
	n = snprintf(joined, sizeof(joined), "%s/%s", rdir, path);
	if (n < 0 || (size_t)n >= sizeof(joined)) {
		reason = "module path too long";
		r = -ENAMETOOLONG;
		goto out;
	}
	if (!realpath(joined, real)) {
		r = -errno;
		/* A missing file and a missing directory on the way are one thing to a client. */
		if (r == -ENOTDIR)
			r = -ENOENT;
		reason = r == -ENOENT ? "no such file in --module-dir" : NULL;
		goto out;
	}
	/* Symlinks are followed, but only to somewhere inside the directory. */
	if (!modpath_inside(rdir, real)) {
		reason = "the module path leads outside --module-dir";
		r = -EPERM;
		goto out;
	}
	if (stat(real, &sb) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		reason = "not a regular file";
		r = -EINVAL;
		goto out;
	}
	if (strlen(real) >= size) {
		reason = "module path too long";
		r = -ENAMETOOLONG;
		goto out;
	}
	memcpy(out, real, strlen(real) + 1);
	r = 0;
out:
	if (why)
		*why = reason ? reason : r < 0 ? strerror(-r) : "";
	return r;
}
