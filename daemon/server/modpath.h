/* Where LoadModule may read code objects from: a client's path, resolved inside the
 * daemon's --module-dir and refused when it would lead anywhere else. Pure: no state,
 * no HIP, so a Check suite can pin every rule without a GPU. */
#ifndef SSEQ_MODPATH_H
#define SSEQ_MODPATH_H

#include <stddef.h>

/* Resolve `path` (relative, no ".." component) inside `dir` to the real path of a
 * regular file, written to out[size]. Returns 0; -EPERM when the path is absolute, has
 * a ".." component or resolves (through symlinks) outside dir, or dir is NULL; -ENOENT
 * when nothing is there; -EINVAL for an empty path or one that is not a regular file;
 * -ENAMETOOLONG; -EACCES; or another negative errno from the file system. *why, when
 * why is not NULL, gets a short reason for the reply. */
int modpath_resolve(const char *dir, const char *path, char *out, size_t size, const char **why);

#endif
