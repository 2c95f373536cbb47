/* Scope-bound release of fds and heap memory, as crun does:
 *   _cleanup_close_ int fd = open(...);   ...   return steal_fd(&fd); */
#ifndef SBX_CLEANUP_H
#define SBX_CLEANUP_H

#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}
static inline int steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}

#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))
#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))

#endif
