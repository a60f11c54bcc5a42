/* sseq_version(): the release the library was built as, which is meson.build's project
 * version, and the check that <sseq/sseq.h>'s SSEQ_VERSION_* say the same. */
#include "sseq/sseq.h"

/* SSEQ_LIB_VERSION and its parts come from client/lib/meson.build. */
#if SSEQ_VERSION_MAJOR != SSEQ_LIB_VERSION_MAJOR ||                                                \
	SSEQ_VERSION_MINOR != SSEQ_LIB_VERSION_MINOR ||                                            \
	SSEQ_VERSION_PATCH != SSEQ_LIB_VERSION_PATCH
#error "sseq.h's SSEQ_VERSION_* differ from meson.build's project version: change them together"
#endif

const char *sseq_version(void)
{
	return SSEQ_LIB_VERSION;
}
