/* libcurl on the daemon's event loop, for every HTTP client of the core
 * (the S3 backup store, the assistant's model): curl's multi interface
 * tells us which sockets to watch and when to wake it
 * (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION), the loop tells curl
 * what happened, and each finished transfer goes to the owner's callback;
 * no thread, no blocking call.
 *
 * libcurl is loaded (dlopen) only when a client is first made: linked in,
 * it and the thirty libraries it pulls in would be mapped into the daemon
 * and so into every sandbox's init, a fork of it, at the cost of page
 * tables and dirty relocation pages per sandbox for nothing. Its calls go
 * through the table below, under their usual names. */
#ifndef SBX_CURL_LOOP_H
#define SBX_CURL_LOOP_H

#define CURL_DISABLE_TYPECHECK /* calls go through the pointers below */
#include <curl/curl.h>

#include "lib/err.h"
#include "lib/loop.h"

struct curl_fns {
	void *handle;
	CURLcode (*global_init)(long);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
	CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
	CURLMcode (*multi_cleanup)(CURLM *);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	CURLcode (*easy_pause)(CURL *, int);
	const char *(*easy_strerror)(CURLcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
};
extern struct curl_fns curl_fns;

#define curl_global_init curl_fns.global_init
#define curl_multi_init curl_fns.multi_init
#undef curl_multi_setopt
#define curl_multi_setopt curl_fns.multi_setopt
#define curl_multi_socket_action curl_fns.multi_socket_action
#define curl_multi_info_read curl_fns.multi_info_read
#define curl_multi_add_handle curl_fns.multi_add_handle
#define curl_multi_remove_handle curl_fns.multi_remove_handle
#define curl_multi_assign curl_fns.multi_assign
#define curl_multi_cleanup curl_fns.multi_cleanup
#define curl_easy_init curl_fns.easy_init
#undef curl_easy_setopt
#define curl_easy_setopt curl_fns.easy_setopt
#undef curl_easy_getinfo
#define curl_easy_getinfo curl_fns.easy_getinfo
#define curl_easy_cleanup curl_fns.easy_cleanup
#define curl_easy_pause curl_fns.easy_pause
#define curl_easy_strerror curl_fns.easy_strerror
#define curl_slist_append curl_fns.slist_append
#define curl_slist_free_all curl_fns.slist_free_all

/* Load libcurl once; who names what needs it in the error. */
int curl_fns_load(const char *who, struct sbx_err *err);

struct curl_loop;
/* A finished transfer: the owner removes and frees it (curl_loop_remove,
 * curl_easy_cleanup), or starts another one, from here. */
typedef void (*curl_loop_done_cb)(CURL *easy, CURLcode result, void *data);

int curl_loop_new(struct loop *l, curl_loop_done_cb done, void *data,
                  struct curl_loop **out, struct sbx_err *err);
/* curl_multi_cleanup: transfers still in it must be removed first. */
void curl_loop_free(struct curl_loop *cl);
CURLM *curl_loop_multi(struct curl_loop *cl);
/* Add a transfer and let curl start it from the loop. */
int curl_loop_add(struct curl_loop *cl, CURL *easy);
void curl_loop_remove(struct curl_loop *cl, CURL *easy);
/* Let curl act now (after transfers were added or unpaused outside its
 * callbacks), and report those that finished. */
void curl_loop_kick(struct curl_loop *cl);

#endif
