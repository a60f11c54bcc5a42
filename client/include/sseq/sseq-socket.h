/* Where sseqd listens unless told otherwise, defined once for the daemon, libsseq, sseqctl
 * and (through sseq_default_socket()) the Python package: SSEQ_SOCKET_DIR/gpu<N>.sock for
 * GPU N, as the systemd socket units do (sseqd@N.socket). Included by <sseq/sseq.h>. */
#ifndef SSEQ_SOCKET_H
#define SSEQ_SOCKET_H

/* The directory of the daemons' sockets, one per GPU. */
#define SSEQ_SOCKET_DIR "/run/sseq"

/* GPU N's socket in SSEQ_SOCKET_DIR: a printf format of N (unsigned). */
#define SSEQ_SOCKET_NAME "gpu%u.sock"

/* The socket sseq_connect() uses when given no path and $SSEQ_SOCKET is unset or empty:
 * the first device's sseqd. */
#define SSEQ_DEFAULT_SOCKET SSEQ_SOCKET_DIR "/gpu0.sock"

#endif
