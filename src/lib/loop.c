#include "lib/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "lib/util.h"

#define LOOP_BATCH 256

struct loop {
	int epfd;
	bool stop;
	struct epoll_event events[LOOP_BATCH];
	int nevents, cur;         /* the batch being dispatched */
	struct loop_timer **heap; /* 1-based */
	size_t nheap, capheap;
	void (*idle_cb)(void *);
	int (*idle_timeout)(void *);
	void *idle_data;
};

struct loop *loop_new(void)
{
	struct loop *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	close(l->epfd);
	free(l->heap);
	free(l);
}

int loop_add(struct loop *l, struct loop_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0)
		return -errno;
	w->active = true;
	return 0;
}

int loop_mod(struct loop *l, struct loop_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

void loop_del(struct loop *l, struct loop_watch *w)
{
	if (!w->active)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->active = false;
	/* its owner may be freed right after: forget pending events */
	for (int i = l->cur + 1; i < l->nevents; i++)
		if (l->events[i].data.ptr == w)
			l->events[i].data.ptr = NULL;
}

static void heap_swap(struct loop *l, size_t a, size_t b)
{
	struct loop_timer *t = l->heap[a];
	l->heap[a] = l->heap[b];
	l->heap[b] = t;
	l->heap[a]->heap_idx = a;
	l->heap[b]->heap_idx = b;
}

static void heap_up(struct loop *l, size_t i)
{
	while (i > 1 && l->heap[i / 2]->deadline_ms > l->heap[i]->deadline_ms) {
		heap_swap(l, i, i / 2);
		i /= 2;
	}
}

static void heap_down(struct loop *l, size_t i)
{
	for (;;) {
		size_t m = i, c = 2 * i;
		if (c <= l->nheap &&
		    l->heap[c]->deadline_ms < l->heap[m]->deadline_ms)
			m = c;
		if (c + 1 <= l->nheap &&
		    l->heap[c + 1]->deadline_ms < l->heap[m]->deadline_ms)
			m = c + 1;
		if (m == i)
			return;
		heap_swap(l, i, m);
		i = m;
	}
}

void loop_timer_stop(struct loop *l, struct loop_timer *t)
{
	size_t i = t->heap_idx;
	if (!i)
		return;
	heap_swap(l, i, l->nheap);
	l->nheap--;
	t->heap_idx = 0;
	if (i <= l->nheap) {
		heap_up(l, i);
		heap_down(l, i);
	}
}

void loop_timer_start(struct loop *l, struct loop_timer *t, uint64_t in_ms)
{
	loop_timer_stop(l, t);
	if (l->nheap + 1 >= l->capheap) {
		size_t n = l->capheap ? l->capheap * 2 : 64;
		struct loop_timer **h = realloc(l->heap, n * sizeof(*h));
		if (!h)
			abort(); /* a lost timer would hang a request forever */
		l->heap = h;
		l->capheap = n;
	}
	t->deadline_ms = now_mono_ms() + in_ms;
	l->heap[++l->nheap] = t;
	t->heap_idx = l->nheap;
	heap_up(l, l->nheap);
}

void loop_set_idle(struct loop *l, void (*cb)(void *), void *data,
                   int (*timeout_ms)(void *))
{
	l->idle_cb = cb;
	l->idle_data = data;
	l->idle_timeout = timeout_ms;
}

void loop_stop(struct loop *l)
{
	l->stop = true;
}

static int next_timeout(struct loop *l)
{
	int t = -1;
	if (l->nheap) {
		uint64_t now = now_mono_ms(), d = l->heap[1]->deadline_ms;
		t = d <= now ? 0 : (d - now > 60000 ? 60000 : (int)(d - now));
	}
	if (l->idle_timeout) {
		int i = l->idle_timeout(l->idle_data);
		if (i >= 0 && (t < 0 || i < t))
			t = i;
	}
	return t;
}

int loop_run(struct loop *l)
{
	while (!l->stop) {
		int n =
		    epoll_wait(l->epfd, l->events, LOOP_BATCH, next_timeout(l));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		l->nevents = n;
		for (l->cur = 0; l->cur < n; l->cur++) {
			struct loop_watch *w = l->events[l->cur].data.ptr;
			if (w)
				w->cb(w, l->events[l->cur].events);
		}
		l->nevents = l->cur = 0;
		uint64_t now = now_mono_ms();
		while (l->nheap && l->heap[1]->deadline_ms <= now) {
			struct loop_timer *t = l->heap[1];
			loop_timer_stop(l, t);
			t->cb(t);
		}
		if (l->idle_cb)
			l->idle_cb(l->idle_data);
	}
	return 0;
}
