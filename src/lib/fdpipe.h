/* Two connected stream sockets joined on the loop: what one sends, the
 * other gets, each way through a bounded buffer (a slow reader stops the
 * other side's reading, never grows memory); an end of one direction is
 * passed on as shutdown(SHUT_WR); the pipe frees itself and closes both
 * fds when both directions are done or either side fails. */
#ifndef SBX_FDPIPE_H
#define SBX_FDPIPE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/loop.h"

struct fdpipe;

/* Takes both fds (non-blocking). first/nfirst: bytes already read from a
 * that b must get first. done (may be NULL) runs when the pipe ends, with
 * the bytes carried each way. NULL when out of memory (fds closed). */
struct fdpipe *
fdpipe_new(struct loop *l, int a, int b, const void *first, size_t nfirst,
           void (*done)(void *ctx, uint64_t a_to_b, uint64_t b_to_a),
           void *ctx);
/* End it now (both fds closed, done called). */
void fdpipe_close(struct fdpipe *p);

#endif
