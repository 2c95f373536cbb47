/* The daemon's one event loop (epoll), as in redis: fd watches with
 * callbacks, one-shot timers on a min-heap, no threads, no locks.
 *
 * Theory of operation. loop_run waits in epoll_wait for at most the time
 * to the earliest timer, dispatches the batch of ready fds (a watch
 * removed during the batch is skipped, see loop_del), then fires every
 * timer that is due, then runs the idle hook (HTTP's own work). A watch
 * and a timer are embedded in their owner, which must remove them before
 * it is freed; a timer is re-armed by starting it again. Nothing that
 * can block (a file in a sandbox, a child's exit) may run in a callback:
 * such work goes to init or a child process and comes back as an fd. */
#ifndef SBX_LOOP_H
#define SBX_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;
struct loop_watch;
struct loop_timer;

typedef void (*loop_fd_cb)(struct loop_watch *w, uint32_t events);
typedef void (*loop_timer_cb)(struct loop_timer *t);

struct loop_watch { /* embedded in its owner; owner outlives it */
	int fd;
	loop_fd_cb cb;
	void *data;
	bool active;
};

struct loop_timer {
	uint64_t deadline_ms; /* monotonic */
	loop_timer_cb cb;
	void *data;
	size_t heap_idx; /* 0 = not armed */
};

struct loop *loop_new(void);
void loop_free(struct loop *l);
int loop_add(struct loop *l, struct loop_watch *w, uint32_t events);
int loop_mod(struct loop *l, struct loop_watch *w, uint32_t events);
/* Safe to call from any callback, for any watch, even one whose events
 * are still pending in the current batch. */
void loop_del(struct loop *l, struct loop_watch *w);
void loop_timer_start(struct loop *l, struct loop_timer *t, uint64_t in_ms);
void loop_timer_stop(struct loop *l, struct loop_timer *t);
/* Called once per iteration, after events and timers (MHD_run). */
void loop_set_idle(struct loop *l, void (*cb)(void *), void *data,
                   int (*timeout_ms)(void *));
int loop_run(struct loop *l);
void loop_stop(struct loop *l);

#endif
