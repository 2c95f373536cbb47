#include "lib/fdpipe.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define PIPE_BUF_SIZE 65536

struct dir {
	char buf[PIPE_BUF_SIZE];
	size_t off, len;
	bool eof;  /* the source ended */
	bool shut; /* passed on */
	uint64_t bytes;
};

struct end {
	struct loop_watch w;
	struct fdpipe *p;
	uint32_t events;
	bool hup; /* no longer watched */
};

struct fdpipe {
	struct loop *l;
	struct end e[2];
	struct dir d[2]; /* d[0]: a to b, d[1]: b to a */
	void (*done)(void *ctx, uint64_t, uint64_t);
	void *ctx;
	bool closing;
};

static void on_io(struct loop_watch *w, uint32_t events);

static void finish(struct fdpipe *p)
{
	if (p->closing)
		return;
	p->closing = true;
	for (int i = 0; i < 2; i++) {
		if (!p->e[i].hup)
			loop_del(p->l, &p->e[i].w);
		close(p->e[i].w.fd);
	}
	if (p->done)
		p->done(p->ctx, p->d[0].bytes, p->d[1].bytes);
	free(p);
}

void fdpipe_close(struct fdpipe *p)
{
	finish(p);
}

/* What each fd must wait for now. */
static void rearm(struct fdpipe *p)
{
	for (int i = 0; i < 2; i++) {
		struct dir *in = &p->d[i], *out = &p->d[1 - i];
		uint32_t ev = 0;
		if (!in->eof && in->len < PIPE_BUF_SIZE)
			ev |= EPOLLIN;
		if (out->len > out->off)
			ev |= EPOLLOUT;
		if (p->e[i].hup)
			continue;
		if (ev != p->e[i].events) {
			p->e[i].events = ev;
			loop_mod(p->l, &p->e[i].w, ev);
		}
	}
}

/* Move what can move; false when the pipe ended. */
static bool pump(struct fdpipe *p)
{
	for (int i = 0; i < 2; i++) {
		struct dir *d = &p->d[i];
		int src = p->e[i].w.fd, dst = p->e[1 - i].w.fd;
		for (;;) {
			if (d->off == d->len)
				d->off = d->len = 0;
			if (!d->eof && d->len < PIPE_BUF_SIZE) {
				ssize_t n =
				    recv(src, d->buf + d->len,
				         PIPE_BUF_SIZE - d->len, MSG_DONTWAIT);
				if (n > 0)
					d->len += (size_t)n;
				else if (n == 0)
					d->eof = true;
				else if (errno != EAGAIN && errno != EINTR)
					return false;
			}
			if (d->len == d->off)
				break;
			ssize_t n = send(dst, d->buf + d->off, d->len - d->off,
			                 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				return false;
			}
			d->off += (size_t)n;
			d->bytes += (uint64_t)n;
			if (d->len < PIPE_BUF_SIZE && !d->eof)
				continue; /* maybe more to read */
			if (d->off < d->len)
				break;
		}
		if (d->eof && d->off == d->len && !d->shut) {
			shutdown(dst, SHUT_WR);
			d->shut = true;
		}
	}
	return !(p->d[0].shut && p->d[1].shut);
}

static void on_io(struct loop_watch *w, uint32_t events)
{
	struct end *e = w->data;
	struct fdpipe *p = e->p;
	int i = (int)(e - p->e);
	if ((events & EPOLLERR) || !pump(p)) {
		finish(p);
		return;
	}
	if ((events & EPOLLHUP) && !p->e[i].hup) {
		/* both ways closed on this side: nothing more comes from it
		 * (pump has read what was left), nothing can go to it; stop
		 * watching it (a hung-up fd is always ready) */
		struct dir *to = &p->d[1 - i];
		p->e[i].hup = true;
		p->d[i].eof = true;
		to->eof = to->shut = true;
		to->off = to->len = 0;
		loop_del(p->l, &p->e[i].w);
		if (!pump(p)) {
			finish(p);
			return;
		}
	}
	rearm(p);
}

struct fdpipe *
fdpipe_new(struct loop *l, int a, int b, const void *first, size_t nfirst,
           void (*done)(void *ctx, uint64_t a_to_b, uint64_t b_to_a), void *ctx)
{
	struct fdpipe *p = calloc(1, sizeof(*p));
	if (!p || nfirst > PIPE_BUF_SIZE) {
		free(p);
		close(a);
		close(b);
		return NULL;
	}
	p->l = l;
	p->done = done;
	p->ctx = ctx;
	memcpy(p->d[0].buf, first, nfirst);
	p->d[0].len = nfirst;
	int fds[2] = {a, b};
	for (int i = 0; i < 2; i++) {
		p->e[i].p = p;
		p->e[i].w = (struct loop_watch){
		    .fd = fds[i], .cb = on_io, .data = &p->e[i]};
		p->e[i].events = EPOLLIN;
		if (loop_add(l, &p->e[i].w, EPOLLIN) < 0) {
			if (i == 1)
				loop_del(l, &p->e[0].w);
			close(a);
			close(b);
			free(p);
			return NULL;
		}
	}
	if (!pump(p)) {
		finish(p);
		return NULL;
	}
	rearm(p);
	return p;
}
