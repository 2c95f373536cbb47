/* loadgen: the HTTP load generator of sandboxd's benchmarks.
 *
 * Plain sockets to a loopback address only, HTTP/1.1 keep-alive, latency of
 * every request taken with clock_gettime. Three modes:
 *
 *   loadgen load ...   closed loop: C connections, each sends a request,
 *                      waits for the whole response, sends the next. One
 *                      thread, epoll, non-blocking sockets. All connections
 *                      are opened before the clock starts, so with
 *                      "-c 100 -n 100" the 100 requests leave together (the
 *                      burst scenario) and "elapsed_us" is the time until
 *                      the last one has been answered.
 *   loadgen sse ...    R sequential SSE requests; every `event: stdout`
 *                      chunk is base64-decoded and each line in it is read as
 *                      a CLOCK_REALTIME timestamp the command printed just
 *                      before writing it (bash's $EPOCHREALTIME, seconds with
 *                      microseconds, or integer nanoseconds). Latency = the
 *                      client's CLOCK_REALTIME right after read() returned
 *                      the bytes, minus that timestamp. Same host, same clock.
 *   loadgen put|get .. R sequential uploads/downloads of a body of --size
 *                      bytes (a fixed pseudo-random pattern; GET verifies
 *                      every byte against it), timed from the first byte sent
 *                      to the last byte of the response.
 *
 * Path templates may contain "{id}": in load mode it becomes
 * PREFIX-(connection % K) with --sandboxes K, or PREFIX-<request number>
 * with --unique (a new sandbox per request); elsewhere it is PREFIX.
 *
 * Output: one JSON object on stdout with every sample ("us": [...], in
 * microseconds), counts per second, status counts and the first errors. The
 * orchestrator (bench/run) turns samples into percentiles. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- options ------------------------------------------------------------ */

#define MAX_HEADERS 8
#define MAX_ERRS 5

static struct {
	const char *mode;
	const char *host;
	int port;
	const char *method;
	const char *path;
	const char *body;
	const char *headers[MAX_HEADERS];
	int nheaders;
	int conns;
	long sandboxes;
	int unique;
	const char *prefix;
	long requests;
	double duration;
	const char *expect;
	double timeout;
	long long size;
	long seq_start;
	char **sessions; /* --session-file: a Session-Id per connection */
	long nsessions;
} o = {
	.host = "127.0.0.1",
	.method = "POST",
	.path = "/",
	.conns = 1,
	.sandboxes = 1,
	.prefix = "bench",
	.timeout = 60,
};

static double mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double real_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "loadgen: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

/* ---- results ------------------------------------------------------------ */

struct samples {
	double *v;
	size_t n, cap;
};

static void push(struct samples *s, double x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 4096;
		s->v = realloc(s->v, s->cap * sizeof(double));
		if (!s->v)
			die("out of memory");
	}
	s->v[s->n++] = x;
}

static void print_samples(const char *key, const struct samples *s)
{
	printf("\"%s\": [", key);
	for (size_t i = 0; i < s->n; i++)
		printf("%s%.1f", i ? "," : "", s->v[i]);
	printf("]");
}

static struct samples lat, first_lat;
static long n_ok, n_err, status_count[600];
static char errs[MAX_ERRS][256];
static int nerrs;
static long per_sec[4096];
static int max_sec = -1;

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void add_err(const char *fmt, ...)
{
	n_err++;
	if (nerrs == MAX_ERRS)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errs[nerrs++], sizeof(errs[0]), fmt, ap);
	va_end(ap);
}

static void print_common(void)
{
	printf("\"ok\": %ld, \"errors\": %ld, \"status\": {", n_ok, n_err);
	int first = 1;
	for (int i = 0; i < 600; i++)
		if (status_count[i]) {
			printf("%s\"%d\": %ld", first ? "" : ", ", i, status_count[i]);
			first = 0;
		}
	printf("}, \"first_errors\": [");
	for (int i = 0; i < nerrs; i++) {
		if (i)
			printf(", ");
		json_str(errs[i]);
	}
	printf("]");
}

/* ---- sockets ------------------------------------------------------------ */

static int dial(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o.port)};
	if (inet_pton(AF_INET, o.host, &a.sin_addr) != 1)
		die("bad host %s", o.host);
	/* benchmarks talk to the daemon on this machine, nothing else */
	if ((ntohl(a.sin_addr.s_addr) >> 24) != 127)
		die("refusing non-loopback address %s", o.host);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void make_id(char *out, size_t cap, long conn, long seq)
{
	if (o.unique)
		snprintf(out, cap, "%s-%ld", o.prefix, o.seq_start + seq);
	else if (conn >= 0)
		snprintf(out, cap, "%s-%ld", o.prefix, conn % o.sandboxes);
	else
		snprintf(out, cap, "%s", o.prefix);
}

static const char *cur_session; /* Session-Id of the request being built */

/* The request head (and the body when it is o.body) into a new string. */
static char *build_request(const char *id, long long body_len, int with_body,
			   size_t *len)
{
	char path[2048];
	size_t pl = 0;
	for (const char *p = o.path; *p && pl < sizeof(path) - 80;) {
		if (!strncmp(p, "{id}", 4)) {
			pl += (size_t)snprintf(path + pl, sizeof(path) - pl, "%s", id);
			p += 4;
		} else {
			path[pl++] = *p++;
		}
	}
	path[pl] = '\0';
	char *s = NULL;
	size_t cap = 0;
	FILE *f = open_memstream(&s, &cap);
	if (!f)
		die("out of memory");
	fprintf(f, "%s %s HTTP/1.1\r\nHost: %s:%d\r\n", o.method, path, o.host,
		o.port);
	int has_ct = 0;
	if (cur_session)
		fprintf(f, "Session-Id: %s\r\n", cur_session);
	for (int i = 0; i < o.nheaders; i++) {
		fprintf(f, "%s\r\n", o.headers[i]);
		if (!strncasecmp(o.headers[i], "content-type:", 13))
			has_ct = 1;
	}
	if (body_len >= 0) {
		if (!has_ct)
			fprintf(f, "Content-Type: %s\r\n",
				with_body ? "application/json"
					  : "application/octet-stream");
		fprintf(f, "Content-Length: %lld\r\n", body_len);
	}
	fprintf(f, "\r\n");
	if (with_body && o.body)
		fputs(o.body, f);
	fclose(f);
	*len = strlen(s);
	return s;
}

/* ---- HTTP response parsing ---------------------------------------------- */

struct resp {
	int hdr_done;
	size_t hdr_len;
	int status;
	long long clen; /* -1: none */
	int chunked, close;
};

/* Parse the head when it is all there: 1 done, 0 need more, -1 bad. */
static int parse_head(const char *b, size_t n, struct resp *r)
{
	const char *end = memmem(b, n, "\r\n\r\n", 4);
	if (!end)
		return n > 65536 ? -1 : 0;
	r->hdr_done = 1;
	r->hdr_len = (size_t)(end - b) + 4;
	r->clen = -1;
	r->chunked = r->close = 0;
	if (n < 12 || strncmp(b, "HTTP/1.", 7))
		return -1;
	r->status = atoi(b + 9);
	for (const char *l = memchr(b, '\n', r->hdr_len); l && l < end;
	     l = memchr(l, '\n', (size_t)(end - l) + 2)) {
		l++;
		if (!strncasecmp(l, "content-length:", 15))
			r->clen = atoll(l + 15);
		else if (!strncasecmp(l, "transfer-encoding:", 18)) {
			const char *v = l + 18;
			while (*v == ' ')
				v++;
			if (!strncasecmp(v, "chunked", 7))
				r->chunked = 1;
		} else if (!strncasecmp(l, "connection:", 11)) {
			const char *v = l + 11;
			while (*v == ' ')
				v++;
			if (!strncasecmp(v, "close", 5))
				r->close = 1;
		}
	}
	if (r->status == 204 || r->status == 304 || r->status / 100 == 1) {
		r->clen = 0; /* no body, whatever the headers say */
		r->chunked = 0;
	}
	return 1;
}

/* Incremental chunked decoder. */
struct chunked {
	int st; /* 0 size line, 1 data, 2 data CRLF, 3 trailer, 4 done */
	unsigned long long remain;
	char line[64];
	size_t ll;
};

typedef void (*sink_fn)(const char *p, size_t n, void *ctx);

/* Feeds n bytes; returns how many were consumed (all unless done). */
static size_t chunked_feed(struct chunked *c, const char *p, size_t n,
			   sink_fn sink, void *ctx)
{
	size_t i = 0;
	while (i < n && c->st != 4) {
		switch (c->st) {
		case 0:
		case 3: {
			char ch = p[i++];
			if (ch == '\n') {
				c->line[c->ll] = '\0';
				if (c->st == 0) {
					c->remain = strtoull(c->line, NULL, 16);
					c->st = c->remain ? 1 : 3;
				} else if (c->ll == 0 || (c->ll == 1 && c->line[0] == '\r')) {
					c->st = 4;
				}
				c->ll = 0;
			} else if (c->ll < sizeof(c->line) - 1) {
				c->line[c->ll++] = ch;
			}
			break;
		}
		case 1: {
			size_t take = n - i;
			if (take > c->remain)
				take = (size_t)c->remain;
			if (sink)
				sink(p + i, take, ctx);
			i += take;
			c->remain -= take;
			if (!c->remain) {
				c->st = 2;
				c->ll = 0;
			}
			break;
		}
		case 2:
			if (p[i++] == '\n')
				c->st = 0;
			break;
		}
	}
	return i;
}

/* ---- load mode ---------------------------------------------------------- */

struct conn {
	int fd;
	long idx;
	int busy;
	char *req;
	size_t req_len, req_off;
	char *rb;
	size_t rlen, rcap;
	struct resp r;
	struct chunked ch;
	size_t ch_off; /* how much of the body the chunked decoder has seen */
	double t0;
};

static int ep;
static long issued, target;
static double t_begin, t_end, t_last_done;
static int stopping;

static void conn_open(struct conn *c)
{
	for (int tries = 0; tries < 50; tries++) {
		c->fd = dial();
		if (c->fd >= 0)
			break;
		usleep(20000);
	}
	if (c->fd < 0)
		die("cannot connect to %s:%d: %s", o.host, o.port, strerror(errno));
	fcntl(c->fd, F_SETFL, O_NONBLOCK);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void conn_reset(struct conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	c->busy = 0;
	conn_open(c);
}

static int want_more(double now)
{
	if (stopping)
		return 0;
	if (o.duration > 0 && now >= t_end)
		return 0;
	return target <= 0 || issued < target;
}

static void conn_send(struct conn *c)
{
	while (c->req_off < c->req_len) {
		ssize_t w = send(c->fd, c->req + c->req_off, c->req_len - c->req_off,
				 MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN) {
				struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
							 .data.ptr = c};
				epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
				return;
			}
			add_err("send: %s", strerror(errno));
			conn_reset(c);
			return;
		}
		c->req_off += (size_t)w;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void conn_start(struct conn *c)
{
	char id[128];
	size_t len;
	make_id(id, sizeof(id), c->idx, issued);
	issued++;
	cur_session = o.nsessions ? o.sessions[c->idx % o.nsessions] : NULL;
	free(c->req);
	c->req = build_request(id, o.body ? (long long)strlen(o.body) : -1, 1, &len);
	c->req_len = len;
	c->req_off = 0;
	c->rlen = 0;
	memset(&c->r, 0, sizeof(c->r));
	memset(&c->ch, 0, sizeof(c->ch));
	c->ch_off = 0;
	c->busy = 1;
	c->t0 = mono_us();
	conn_send(c);
}

static void finish_req(struct conn *c, int ok_status, double now)
{
	double us = now - c->t0;
	c->busy = 0;
	status_count[c->r.status > 0 && c->r.status < 600 ? c->r.status : 0]++;
	int good = ok_status;
	if (good && o.expect) {
		const char *body = c->rb + c->r.hdr_len;
		size_t blen = c->rlen - c->r.hdr_len;
		if (!memmem(body, blen, o.expect, strlen(o.expect)))
			good = 0;
	}
	if (good) {
		n_ok++;
		push(&lat, us);
		int sec = (int)((now - t_begin) / 1e6);
		if (sec >= 0 && sec < 4096) {
			per_sec[sec]++;
			if (sec > max_sec)
				max_sec = sec;
		}
	} else {
		size_t blen = c->rlen > c->r.hdr_len ? c->rlen - c->r.hdr_len : 0;
		if (blen > 200)
			blen = 200;
		char excerpt[201];
		memcpy(excerpt, c->rb + c->r.hdr_len, blen);
		excerpt[blen] = '\0';
		add_err("status %d: %s", c->r.status, excerpt);
	}
	if (now > t_last_done)
		t_last_done = now;
	if (c->r.close)
		conn_reset(c);
	if (want_more(now))
		conn_start(c);
}

/* 1 when the response in c->rb is complete. */
static int response_complete(struct conn *c)
{
	if (!c->r.hdr_done) {
		int p = parse_head(c->rb, c->rlen, &c->r);
		if (p < 0)
			return -1;
		if (!p)
			return 0;
		c->ch_off = c->r.hdr_len;
	}
	if (c->r.chunked) {
		c->ch_off += chunked_feed(&c->ch, c->rb + c->ch_off,
					  c->rlen - c->ch_off, NULL, NULL);
		return c->ch.st == 4;
	}
	if (c->r.clen >= 0)
		return c->rlen >= c->r.hdr_len + (size_t)c->r.clen;
	return 0; /* ends at close */
}

static void conn_readable(struct conn *c)
{
	for (;;) {
		if (c->rcap - c->rlen < 16384) {
			c->rcap = c->rcap ? c->rcap * 2 : 65536;
			c->rb = realloc(c->rb, c->rcap);
			if (!c->rb)
				die("out of memory");
		}
		ssize_t n = recv(c->fd, c->rb + c->rlen, c->rcap - c->rlen - 1, 0);
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			double now = mono_us();
			if (c->busy && c->r.hdr_done && !c->r.chunked && c->r.clen < 0) {
				c->r.close = 1;
				finish_req(c, c->r.status >= 200 && c->r.status < 300, now);
				return;
			}
			if (c->busy)
				add_err("connection closed%s: %s",
					c->r.hdr_done ? " mid-body" : "",
					n < 0 ? strerror(errno) : "EOF");
			conn_reset(c);
			if (want_more(now))
				conn_start(c);
			return;
		}
		c->rlen += (size_t)n;
		c->rb[c->rlen] = '\0';
		if (!c->busy)
			continue; /* stray bytes: ignore */
		int done = response_complete(c);
		if (done < 0) {
			add_err("bad response: %.60s", c->rb);
			conn_reset(c);
			if (want_more(mono_us()))
				conn_start(c);
			return;
		}
		if (done) {
			finish_req(c, c->r.status >= 200 && c->r.status < 300, mono_us());
			return;
		}
	}
}

static int mode_load(void)
{
	if (o.duration <= 0 && o.requests <= 0)
		die("load: give --requests or --duration");
	target = o.requests;
	ep = epoll_create1(EPOLL_CLOEXEC);
	struct conn *cs = calloc((size_t)o.conns, sizeof(*cs));
	if (!cs)
		die("out of memory");
	for (int i = 0; i < o.conns; i++) {
		cs[i].idx = i;
		cs[i].fd = -1;
		conn_open(&cs[i]);
	}
	t_begin = mono_us();
	t_end = t_begin + o.duration * 1e6;
	for (int i = 0; i < o.conns && want_more(t_begin); i++)
		conn_start(&cs[i]);
	struct epoll_event evs[256];
	for (;;) {
		int busy = 0;
		for (int i = 0; i < o.conns; i++)
			busy += cs[i].busy;
		if (!busy)
			break;
		int n = epoll_wait(ep, evs, 256, 100);
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (evs[i].events & EPOLLOUT)
				conn_send(c);
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				conn_readable(c);
		}
		double now = mono_us();
		for (int i = 0; i < o.conns; i++) {
			struct conn *c = &cs[i];
			if (c->busy && now - c->t0 > o.timeout * 1e6) {
				add_err("timeout after %.0f s", o.timeout);
				conn_reset(c);
				if (want_more(now))
					conn_start(c);
			}
		}
	}
	double elapsed = (o.duration > 0 && t_last_done > t_end ? t_end : t_last_done) - t_begin;
	/* with --duration, requests still open at the end finish after it;
	 * count what completed inside the window */
	long in_window = 0;
	int full_secs = o.duration > 0 ? (int)o.duration : max_sec + 1;
	for (int s = 0; s < full_secs && s < 4096; s++)
		in_window += per_sec[s];
	printf("{\"mode\": \"load\", \"conns\": %d, \"issued\": %ld, ", o.conns,
	       issued);
	print_common();
	printf(", \"elapsed_us\": %.1f, \"last_done_us\": %.1f, "
	       "\"completed_in_window\": %ld, \"per_sec\": [",
	       elapsed, t_last_done - t_begin, in_window);
	for (int s = 0; s < full_secs && s < 4096; s++)
		printf("%s%ld", s ? "," : "", per_sec[s]);
	printf("], ");
	print_samples("us", &lat);
	printf("}\n");
	for (int i = 0; i < o.conns; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	return 0;
}

/* ---- blocking helpers for sse / put / get ------------------------------- */

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void set_rcv_timeout(int fd)
{
	struct timeval tv = {.tv_sec = (time_t)o.timeout,
			     .tv_usec = (suseconds_t)((o.timeout - (double)(time_t)o.timeout) * 1e6)};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* ---- sse mode ----------------------------------------------------------- */

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+' || c == '-') return 62;
	if (c == '/' || c == '_') return 63;
	return -1;
}

/* Decodes in place; returns the length, or -1 when it is not base64. */
static long b64decode(char *s, size_t n)
{
	unsigned acc = 0;
	int bits = 0;
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '=' || s[i] == '\r' || s[i] == '\n')
			continue;
		int v = b64val((unsigned char)s[i]);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			s[out++] = (char)((acc >> bits) & 0xff);
		}
	}
	return (long)out;
}

struct sse {
	char line[65536];
	size_t ll;
	char event[64];
	char data[65536];
	size_t dl;
	double recv_real;
	int got_exit, got_first, events;
	char exit_data[256];
	char err_data[256];
	long stdout_bytes;
};

static void sse_stamp_line(struct sse *s, const char *t, size_t n)
{
	char tmp[64];
	if (!n || n >= sizeof(tmp))
		return;
	memcpy(tmp, t, n);
	tmp[n] = '\0';
	double ts_us;
	if (strchr(tmp, '.') || strchr(tmp, ','))
		ts_us = strtod(tmp, NULL) * 1e6; /* $EPOCHREALTIME */
	else {
		long long v = atoll(tmp);
		ts_us = v > 100000000000000000LL ? (double)v / 1e3  /* ns */
			: v > 100000000000000LL  ? (double)v         /* us */
						 : (double)v * 1e6;  /* s */
	}
	if (ts_us < 1e15)
		return; /* not a timestamp */
	double l = s->recv_real - ts_us;
	push(&lat, l);
	if (!s->got_first) {
		s->got_first = 1;
		push(&first_lat, l);
	}
}

static void sse_dispatch(struct sse *s)
{
	s->events++;
	if (!strcmp(s->event, "stdout")) {
		long n = b64decode(s->data, s->dl);
		if (n < 0)
			n = (long)s->dl; /* plain text */
		s->stdout_bytes += n;
		const char *p = s->data, *end = s->data + n;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			const char *e = nl ? nl : end;
			sse_stamp_line(s, p, (size_t)(e - p));
			p = e + 1;
		}
	} else if (!strcmp(s->event, "exit")) {
		s->got_exit = 1;
		snprintf(s->exit_data, sizeof(s->exit_data), "%.*s", (int)s->dl, s->data);
	} else if (!strcmp(s->event, "error")) {
		s->got_exit = 1;
		snprintf(s->err_data, sizeof(s->err_data), "%.*s", (int)s->dl, s->data);
	}
	s->event[0] = '\0';
	s->dl = 0;
}

static void sse_sink(const char *p, size_t n, void *ctx)
{
	struct sse *s = ctx;
	for (size_t i = 0; i < n; i++) {
		char ch = p[i];
		if (ch != '\n') {
			if (s->ll < sizeof(s->line) - 1)
				s->line[s->ll++] = ch;
			continue;
		}
		if (s->ll && s->line[s->ll - 1] == '\r')
			s->ll--;
		s->line[s->ll] = '\0';
		if (s->ll == 0) {
			if (s->event[0] || s->dl)
				sse_dispatch(s);
		} else if (!strncmp(s->line, "event:", 6)) {
			const char *v = s->line + 6;
			while (*v == ' ')
				v++;
			snprintf(s->event, sizeof(s->event), "%s", v);
		} else if (!strncmp(s->line, "data:", 5)) {
			const char *v = s->line + 5;
			if (*v == ' ')
				v++;
			size_t vl = strlen(v);
			if (s->dl && s->dl < sizeof(s->data) - 1)
				s->data[s->dl++] = '\n';
			if (vl > sizeof(s->data) - 1 - s->dl)
				vl = sizeof(s->data) - 1 - s->dl;
			memcpy(s->data + s->dl, v, vl);
			s->dl += vl;
		}
		s->ll = 0;
	}
}

static int mode_sse(void)
{
	if (o.requests <= 0)
		o.requests = 10;
	static char buf[65536];
	static struct sse s;
	for (long i = 0; i < o.requests; i++) {
		int fd = dial();
		if (fd < 0)
			die("cannot connect: %s", strerror(errno));
		set_rcv_timeout(fd);
		char id[128];
		size_t len;
		make_id(id, sizeof(id), -1, i);
		char *req = build_request(id, o.body ? (long long)strlen(o.body) : -1, 1, &len);
		memset(&s, 0, sizeof(s));
		struct resp r = {0};
		struct chunked ch = {0};
		size_t have = 0;
		int hdr = 0, bad = 0;
		if (send_all(fd, req, len) < 0) {
			add_err("send: %s", strerror(errno));
			bad = 1;
		}
		free(req);
		while (!bad && !s.got_exit) {
			ssize_t n = recv(fd, buf + have, sizeof(buf) - have - 1, 0);
			s.recv_real = real_us();
			if (n <= 0) {
				add_err("request %ld: connection ended before the exit "
					"event (%s)", i, n < 0 ? strerror(errno) : "EOF");
				bad = 1;
				break;
			}
			have += (size_t)n;
			buf[have] = '\0';
			const char *body = buf;
			size_t blen = have;
			if (!hdr) {
				int p = parse_head(buf, have, &r);
				if (p < 0) {
					add_err("bad response head");
					bad = 1;
					break;
				}
				if (!p)
					continue;
				hdr = 1;
				status_count[r.status > 0 && r.status < 600 ? r.status : 0]++;
				if (r.status != 200) {
					add_err("status %d: %.150s", r.status,
						buf + r.hdr_len);
					bad = 1;
					break;
				}
				body = buf + r.hdr_len;
				blen = have - r.hdr_len;
			}
			if (r.chunked)
				chunked_feed(&ch, body, blen, sse_sink, &s);
			else
				sse_sink(body, blen, &s);
			have = 0;
			if (r.chunked && ch.st == 4)
				break;
		}
		close(fd);
		if (!bad && !s.got_exit)
			add_err("request %ld: no exit event", i);
		else if (!bad && s.err_data[0])
			add_err("request %ld: error event %s", i, s.err_data);
		else if (!bad)
			n_ok++;
	}
	printf("{\"mode\": \"sse\", ");
	print_common();
	printf(", ");
	print_samples("us", &lat);
	printf(", ");
	print_samples("first_us", &first_lat);
	printf("}\n");
	return 0;
}

/* ---- pipe mode: the floor for streaming ---------------------------------- */

/* The same command as the SSE scenario, run by bash with its stdout on a
 * pipe that this process reads: no sandbox, no HTTP, no base64. */
static int mode_pipe(void)
{
	if (o.requests <= 0)
		o.requests = 10;
	if (!o.body)
		die("pipe: give the command with --body");
	static char buf[65536];
	static struct sse s;
	for (long i = 0; i < o.requests; i++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			die("pipe: %s", strerror(errno));
		pid_t pid = fork();
		if (pid == 0) {
			dup2(p[1], 1);
			execl("/bin/bash", "bash", "-c", o.body, (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		memset(&s, 0, sizeof(s));
		for (;;) {
			ssize_t n = read(p[0], buf, sizeof(buf));
			s.recv_real = real_us();
			if (n <= 0)
				break;
			const char *q = buf, *end = buf + n;
			while (q < end) {
				const char *nl = memchr(q, '\n', (size_t)(end - q));
				const char *e = nl ? nl : end;
				sse_stamp_line(&s, q, (size_t)(e - q));
				q = e + 1;
			}
		}
		close(p[0]);
		int st;
		waitpid(pid, &st, 0);
		if (st == 0)
			n_ok++;
		else
			add_err("bash exited with status %d", st);
	}
	printf("{\"mode\": \"pipe\", ");
	print_common();
	printf(", ");
	print_samples("us", &lat);
	printf(", ");
	print_samples("first_us", &first_lat);
	printf("}\n");
	return 0;
}

/* ---- put / get ---------------------------------------------------------- */

#define BLOCK (1u << 20)
static unsigned char *block;

static void make_block(void)
{
	block = malloc(BLOCK);
	if (!block)
		die("out of memory");
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < BLOCK; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(block + i, &x, 8);
	}
}

struct verify {
	unsigned long long off;
	int bad;
};

static void verify_sink(const char *p, size_t n, void *ctx)
{
	struct verify *v = ctx;
	while (n) {
		size_t bo = (size_t)(v->off % BLOCK);
		size_t take = BLOCK - bo;
		if (take > n)
			take = n;
		if (!v->bad && memcmp(p, block + bo, take))
			v->bad = 1;
		v->off += take;
		p += take;
		n -= take;
	}
}

static int mode_file(int put)
{
	if (o.requests <= 0)
		o.requests = 3;
	if (o.size <= 0)
		die("give --size");
	make_block();
	size_t rcap = 1u << 20;
	char *rb = malloc(rcap + 1);
	if (!rb)
		die("out of memory");
	for (long i = 0; i < o.requests; i++) {
		int fd = dial();
		if (fd < 0)
			die("cannot connect: %s", strerror(errno));
		set_rcv_timeout(fd);
		char id[128];
		size_t len;
		make_id(id, sizeof(id), -1, i);
		char *req = build_request(id, put ? o.size : -1, 0, &len);
		double t0 = mono_us();
		int bad = send_all(fd, req, len) < 0;
		free(req);
		for (long long sent = 0; put && !bad && sent < o.size;) {
			size_t take = BLOCK;
			if ((long long)take > o.size - sent)
				take = (size_t)(o.size - sent);
			if (send_all(fd, (const char *)block, take) < 0) {
				/* the server may answer early (413) and close */
				break;
			}
			sent += (long long)take;
		}
		struct resp r = {0};
		struct chunked ch = {0};
		struct verify v = {0};
		size_t have = 0;
		unsigned long long body = 0;
		int done = 0;
		char excerpt[160] = "";
		while (!bad && !done) {
			ssize_t n = recv(fd, rb + have, rcap - have, 0);
			if (n <= 0) {
				if (r.hdr_done && !r.chunked && r.clen < 0)
					done = 1; /* close-delimited body */
				else
					bad = 1;
				break;
			}
			have += (size_t)n;
			if (!r.hdr_done) {
				rb[have] = '\0';
				int p = parse_head(rb, have, &r);
				if (p < 0) {
					bad = 1;
					break;
				}
				if (!p)
					continue;
				status_count[r.status > 0 && r.status < 600 ? r.status : 0]++;
				memmove(rb, rb + r.hdr_len, have - r.hdr_len);
				have -= r.hdr_len;
			}
			if (r.status / 100 != 2 && have)
				snprintf(excerpt, sizeof(excerpt), "%.*s",
					 (int)(have < 150 ? have : 150), rb);
			if (r.chunked) {
				unsigned long long before = v.off;
				chunked_feed(&ch, rb, have, put ? NULL : verify_sink, &v);
				body += v.off - before;
				done = ch.st == 4;
			} else {
				if (!put)
					verify_sink(rb, have, &v);
				body += have;
				done = r.clen >= 0 && body >= (unsigned long long)r.clen;
			}
			have = 0;
		}
		double us = mono_us() - t0;
		close(fd);
		if (bad) {
			add_err("request %ld: connection error (%s) after %llu body bytes",
				i, strerror(errno), body);
		} else if (r.status / 100 != 2) {
			add_err("status %d: %s", r.status, excerpt);
		} else if (!put && (body != (unsigned long long)o.size || v.bad)) {
			add_err("GET returned %llu bytes%s, expected %lld", body,
				v.bad ? " with wrong content" : "", o.size);
		} else {
			n_ok++;
			push(&lat, us);
		}
	}
	printf("{\"mode\": \"%s\", \"bytes\": %lld, ", put ? "put" : "get", o.size);
	print_common();
	printf(", ");
	print_samples("us", &lat);
	printf("}\n");
	return 0;
}

/* ---- loopback mode: the ceiling of a GET here ---------------------------- */

/* The GET's bytes with no HTTP and no sandbox: a cached file of --size
 * bytes (written to the path given as --body, removed after) read 1 MiB
 * at a time and sent into a loopback TCP connection by a child, received
 * and checked by this process as mode_file's GET does. read + send, not
 * sendfile: on this VM sendfile's page references carried 1.3-1.7 GB/s
 * where read + send carried 2.4-2.9 (quiet machine, bench/ANALYSIS.md). */
static int mode_loopback(void)
{
	if (o.requests <= 0)
		o.requests = 3;
	if (o.size <= 0 || !o.body)
		die("loopback: give --size and --body FILE (written, then removed)");
	make_block();
	int f = open(o.body, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (f < 0)
		die("%s: %s", o.body, strerror(errno));
	for (long long off = 0; off < o.size; off += BLOCK) {
		size_t take = BLOCK;
		if ((long long)take > o.size - off)
			take = (size_t)(o.size - off);
		if (write(f, block, take) != (ssize_t)take)
			die("%s: %s", o.body, strerror(errno));
	}
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(ls, 1) < 0 || getsockname(ls, (struct sockaddr *)&a, &alen) < 0)
		die("loopback: %s", strerror(errno));
	char *rb = malloc(BLOCK);
	if (!rb)
		die("out of memory");
	for (long i = 0; i < o.requests; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork: %s", strerror(errno));
		if (pid == 0) {
			int c = accept(ls, NULL, NULL);
			off_t off = 0;
			ssize_t k;
			while (c >= 0 && off < o.size) {
				if ((k = pread(f, rb, BLOCK, off)) <= 0 ||
				    send_all(c, rb, (size_t)k) < 0)
					_exit(1);
				off += k;
			}
			_exit(c < 0);
		}
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			die("loopback: connect: %s", strerror(errno));
		struct verify v = {0};
		double t0 = mono_us();
		ssize_t n;
		while ((n = recv(fd, rb, BLOCK, 0)) > 0)
			verify_sink(rb, (size_t)n, &v);
		double us = mono_us() - t0;
		close(fd);
		int st;
		waitpid(pid, &st, 0);
		if (v.off != (unsigned long long)o.size || v.bad || st != 0)
			add_err("transfer %ld: %llu bytes%s, sender status %d", i, v.off,
				v.bad ? " with wrong content" : "", st);
		else {
			n_ok++;
			push(&lat, us);
		}
	}
	close(ls);
	close(f);
	unlink(o.body);
	printf("{\"mode\": \"loopback\", \"bytes\": %lld, ", o.size);
	print_common();
	printf(", ");
	print_samples("us", &lat);
	printf("}\n");
	return 0;
}

/* ---- main --------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: loadgen load|sse|pipe|put|get|loopback --port P [--host 127.x.x.x]\n"
		"  [--method M] [--path TEMPLATE] [--body JSON] [--header 'K: V']...\n"
		"  [--conns C] [--sandboxes K | --unique] [--prefix P] [--seq-start N]\n"
		"  [--requests N | --duration S] [--expect SUBSTR] [--timeout S]\n"
		"  [--size BYTES] [--session-file F (one Session-Id per connection)]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"host", 1, 0, 'H'},	  {"port", 1, 0, 'p'},
		{"method", 1, 0, 'm'},	  {"path", 1, 0, 'P'},
		{"body", 1, 0, 'b'},	  {"header", 1, 0, 'h'},
		{"conns", 1, 0, 'c'},	  {"sandboxes", 1, 0, 'k'},
		{"unique", 0, 0, 'u'},	  {"prefix", 1, 0, 'x'},
		{"requests", 1, 0, 'n'},  {"duration", 1, 0, 'd'},
		{"expect", 1, 0, 'e'},	  {"timeout", 1, 0, 't'},
		{"size", 1, 0, 's'},	  {"seq-start", 1, 0, 'S'},
		{"session-file", 1, 0, 'F'},
		{0, 0, 0, 0},
	};
	if (argc < 2)
		usage();
	o.mode = argv[1];
	optind = 2;
	int c;
	while ((c = getopt_long(argc, argv, "H:p:m:P:b:h:c:k:ux:n:d:e:t:s:S:F:", opts, NULL)) != -1) {
		switch (c) {
		case 'H': o.host = optarg; break;
		case 'p': o.port = atoi(optarg); break;
		case 'm': o.method = optarg; break;
		case 'P': o.path = optarg; break;
		case 'b': o.body = optarg; break;
		case 'h':
			if (o.nheaders == MAX_HEADERS)
				die("too many headers");
			o.headers[o.nheaders++] = optarg;
			break;
		case 'c': o.conns = atoi(optarg); break;
		case 'k': o.sandboxes = atol(optarg); break;
		case 'u': o.unique = 1; break;
		case 'x': o.prefix = optarg; break;
		case 'n': o.requests = atol(optarg); break;
		case 'd': o.duration = atof(optarg); break;
		case 'e': o.expect = optarg; break;
		case 't': o.timeout = atof(optarg); break;
		case 's': o.size = atoll(optarg); break;
		case 'S': o.seq_start = atol(optarg); break;
		case 'F': {
			FILE *sf = fopen(optarg, "r");
			char line[256];
			if (!sf)
				die("%s: %s", optarg, strerror(errno));
			while (fgets(line, sizeof(line), sf)) {
				line[strcspn(line, "\r\n")] = '\0';
				if (!line[0])
					continue;
				o.sessions = realloc(o.sessions, (size_t)(o.nsessions + 1) * sizeof(char *));
				o.sessions[o.nsessions++] = strdup(line);
			}
			fclose(sf);
			break;
		}
		default: usage();
		}
	}
	if ((o.port <= 0 && strcmp(o.mode, "pipe") && strcmp(o.mode, "loopback")) ||
	    o.conns <= 0 || o.sandboxes <= 0)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(o.mode, "load"))
		return mode_load();
	if (!strcmp(o.mode, "sse"))
		return mode_sse();
	if (!strcmp(o.mode, "pipe"))
		return mode_pipe();
	if (!strcmp(o.mode, "put"))
		return mode_file(1);
	if (!strcmp(o.mode, "get"))
		return mode_file(0);
	if (!strcmp(o.mode, "loopback"))
		return mode_loopback();
	usage();
}
