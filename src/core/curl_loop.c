/* libcurl on the event loop (curl_loop.h). */
#include "core/curl_loop.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

struct curl_fns curl_fns;

int curl_fns_load(const char *who, struct sbx_err *err)
{
	static const char *const names[] = {
	    "curl_global_init",         "curl_multi_init",
	    "curl_multi_setopt",        "curl_multi_socket_action",
	    "curl_multi_info_read",     "curl_multi_add_handle",
	    "curl_multi_remove_handle", "curl_multi_assign",
	    "curl_multi_cleanup",       "curl_easy_init",
	    "curl_easy_setopt",         "curl_easy_getinfo",
	    "curl_easy_cleanup",        "curl_easy_pause",
	    "curl_easy_strerror",       "curl_slist_append",
	    "curl_slist_free_all"};
	if (curl_fns.handle)
		return 0;
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return sbx_err_set(
		    err, ENOENT, "%s need%s libcurl (Debian: libcurl4): %s",
		    who, who[strlen(who) - 1] == 's' ? "" : "s", dlerror());
	void **slot = (void **)&curl_fns.global_init;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(slot[i] = dlsym(h, names[i]))) {
			dlclose(h);
			memset(&curl_fns, 0, sizeof(curl_fns));
			return sbx_err_set(err, ENOENT, "libcurl: no %s",
			                   names[i]);
		}
	}
	if (curl_fns.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		dlclose(h);
		memset(&curl_fns, 0, sizeof(curl_fns));
		return sbx_err_set(err, EIO, "curl_global_init failed");
	}
	curl_fns.handle = h;
	return 0;
}

struct curl_sock {
	struct loop_watch w;
	struct curl_loop *cl;
};

struct curl_loop {
	struct loop *loop;
	CURLM *multi;
	struct loop_timer timer;
	curl_loop_done_cb done;
	void *data;
};

CURLM *curl_loop_multi(struct curl_loop *cl)
{
	return cl->multi;
}

static void check_done(struct curl_loop *cl)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(cl->multi, &left)))
		if (m->msg == CURLMSG_DONE)
			cl->done(m->easy_handle, m->data.result, cl->data);
}

static void on_sock(struct loop_watch *w, uint32_t events)
{
	struct curl_sock *ss = w->data;
	struct curl_loop *cl = ss->cl;
	int flags = (events & EPOLLIN ? CURL_CSELECT_IN : 0) |
	            (events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
	            (events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
	int running;
	curl_socket_t fd = w->fd;
	curl_multi_socket_action(cl->multi, fd, flags, &running);
	check_done(cl);
}

static int sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *sockp)
{
	struct curl_loop *cl = userp;
	struct curl_sock *ss = sockp;
	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (ss) {
			loop_del(cl->loop, &ss->w);
			curl_multi_assign(cl->multi, s, NULL);
			free(ss);
		}
		return 0;
	}
	uint32_t ev = (what & CURL_POLL_IN ? EPOLLIN : 0) |
	              (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	if (!ss) {
		ss = calloc(1, sizeof(*ss));
		if (!ss)
			return -1;
		ss->cl = cl;
		ss->w = (struct loop_watch){.fd = s, .cb = on_sock, .data = ss};
		if (loop_add(cl->loop, &ss->w, ev) < 0) {
			free(ss);
			return -1;
		}
		curl_multi_assign(cl->multi, s, ss);
	} else {
		loop_mod(cl->loop, &ss->w, ev);
	}
	return 0;
}

static void on_timer(struct loop_timer *t)
{
	curl_loop_kick(t->data);
}

static int timer_cb(CURLM *multi, long ms, void *userp)
{
	struct curl_loop *cl = userp;
	(void)multi;
	if (ms < 0)
		loop_timer_stop(cl->loop, &cl->timer);
	else
		loop_timer_start(cl->loop, &cl->timer, (uint64_t)ms);
	return 0;
}

void curl_loop_kick(struct curl_loop *cl)
{
	int running;
	curl_multi_socket_action(cl->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(cl);
}

int curl_loop_new(struct loop *l, curl_loop_done_cb done, void *data,
                  struct curl_loop **out, struct sbx_err *err)
{
	if (!curl_fns.handle)
		return sbx_err_set(err, EINVAL, "libcurl is not loaded");
	struct curl_loop *cl = calloc(1, sizeof(*cl));
	if (!cl || !(cl->multi = curl_multi_init())) {
		free(cl);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	cl->loop = l;
	cl->done = done;
	cl->data = data;
	cl->timer = (struct loop_timer){.cb = on_timer, .data = cl};
	curl_multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	curl_multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
	curl_multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
	curl_multi_setopt(cl->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 8L);
	*out = cl;
	return 0;
}

void curl_loop_free(struct curl_loop *cl)
{
	if (!cl)
		return;
	loop_timer_stop(cl->loop, &cl->timer);
	curl_multi_cleanup(cl->multi); /* REMOVEs its sockets */
	free(cl);
}

int curl_loop_add(struct curl_loop *cl, CURL *easy)
{
	CURLMcode mc = curl_multi_add_handle(cl->multi, easy);
	if (mc == CURLM_OUT_OF_MEMORY)
		return -ENOMEM;
	if (mc != CURLM_OK) /* a misuse of curl: no errno to keep */
		return -EIO;
	/* curl asks for its timer (timer_cb), which starts the transfer from
	 * the loop, never inside the caller */
	return 0;
}

void curl_loop_remove(struct curl_loop *cl, CURL *easy)
{
	curl_multi_remove_handle(cl->multi, easy);
}
