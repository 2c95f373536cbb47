/* The room assistant's model (llm.h): one POST per question, its answer
 * collected (streaming is not asked for), parsed with jansson. */
#include "core/llm.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/curl_loop.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/util.h"

#define ANSWER_MAX (8u << 20)
#define KEY_MAX 8192

struct llm_req {
	struct llm *c;
	CURL *easy;
	struct curl_slist *headers;
	char *body;
	struct buf answer;
	void (*done)(const struct llm_answer *a, void *ctx);
	void *ctx;
	uint64_t start_ms;
	struct llm_req *next;
};

struct llm {
	struct loop *loop;
	struct curl_loop *cl;
	char *url, *model;
	char *auth; /* "Authorization: Bearer <key>", or NULL */
	uint64_t timeout_ms;
	struct llm_req *reqs;
};

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

char *llm_completions_url(const char *base)
{
	static const char tail[] = "/chat/completions";
	size_t l = strlen(base);
	while (l && base[l - 1] == '/')
		l--;
	if (l >= sizeof(tail) - 1 &&
	    !strncmp(base + l - (sizeof(tail) - 1), tail, sizeof(tail) - 1))
		return strndup(base, l);
	char *u;
	return asprintf(&u, "%.*s%s", (int)l, base, tail) < 0 ? NULL : u;
}

int llm_parse_answer(const char *body, size_t len, char **text,
                     struct sbx_err *err)
{
	json_error_t jerr;
	*text = NULL;
	json_t *j = json_loadb(body, len, 0, &jerr);
	if (!j)
		return sbx_err_set(err, EBADMSG,
		                   "the model's answer is not JSON: %s",
		                   jerr.text);
	json_t *content = json_object_get(
	    json_object_get(json_array_get(json_object_get(j, "choices"), 0),
	                    "message"),
	    "content");
	int rc = 0;
	if (!json_is_string(content))
		rc = sbx_err_set(err, EBADMSG,
		                 "the model's answer has no "
		                 "choices[0].message.content text");
	else if (!(*text = strndup(json_string_value(content),
	                           json_string_length(content))))
		rc = sbx_err_set(err, ENOMEM, "out of memory");
	json_decref(j);
	return rc;
}

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
	struct llm_req *q = ud;
	size_t len = size * n;
	if (q->answer.len + len > ANSWER_MAX)
		return 0; /* fails the transfer */
	return buf_append(&q->answer, p, len) < 0 ? 0 : len;
}

static void req_free(struct llm_req *q)
{
	if (q->easy) {
		curl_loop_remove(q->c->cl, q->easy);
		curl_easy_cleanup(q->easy);
	}
	curl_slist_free_all(q->headers);
	free(q->body);
	buf_free(&q->answer);
	free(q);
}

static void req_unlink(struct llm_req *q)
{
	for (struct llm_req **p = &q->c->reqs; *p; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			return;
		}
}

/* An error body's message, when it has one ({"error": {"message": ...}} or
 * {"error": "..."}), else its start. */
static void error_detail(const struct buf *b, char *out, size_t cap)
{
	json_t *j = b->len ? json_loadb(b->data, b->len, 0, NULL) : NULL;
	json_t *e = json_object_get(j, "error");
	const char *m = json_is_string(e)
	                    ? json_string_value(e)
	                    : json_string_value(json_object_get(e, "message"));
	if (m)
		snprintf(out, cap, ": %s", m);
	else if (b->len)
		snprintf(out, cap, ": %.200s", b->data);
	else
		out[0] = '\0';
	json_decref(j);
}

static void on_done(CURL *easy, CURLcode cc, void *data)
{
	struct llm *c = data;
	struct llm_req *q = NULL;
	char why[700], detail[400];
	struct llm_answer a = {.status = LLM_FAILED, .why = why};
	long status = 0;
	char *text = NULL;
	struct sbx_err perr = {0};
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&q);
	if (!q)
		return;
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
	if (cc == CURLE_OPERATION_TIMEDOUT) {
		a.status = LLM_TIMEOUT;
		snprintf(
		    why, sizeof(why),
		    "the model did not answer within %llu ms (--llm-timeout)",
		    (unsigned long long)c->timeout_ms);
	} else if (cc != CURLE_OK) {
		snprintf(why, sizeof(why), "the model's endpoint %s: %s",
		         c->url, curl_easy_strerror(cc));
	} else if (status < 200 || status > 299) {
		buf_cstr(&q->answer);
		error_detail(&q->answer, detail, sizeof(detail));
		snprintf(why, sizeof(why),
		         "the model's endpoint answered HTTP %ld%s", status,
		         detail);
	} else if (llm_parse_answer(q->answer.data ? q->answer.data : "",
	                            q->answer.len, &text, &perr) < 0) {
		snprintf(why, sizeof(why), "%s", perr.msg);
	} else {
		a.status = LLM_OK;
		a.text = text;
		a.why = NULL;
	}
	log_info("event=llm-answer status=%ld result=%s ms=%llu", status,
	         a.status == LLM_OK        ? "ok"
	         : a.status == LLM_TIMEOUT ? "timeout"
	                                   : "failed",
	         (unsigned long long)(now_mono_ms() - q->start_ms));
	req_unlink(q);
	q->done(&a, q->ctx);
	free(text);
	req_free(q);
}

static int read_key(const char *path, char **out, struct sbx_err *err)
{
	char *buf = calloc(1, KEY_MAX + 1);
	if (!buf)
		return sbx_err_set(err, ENOMEM, "out of memory");
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		free(buf);
		return sbx_err_sys(err, errno, "--llm-key-file %s", path);
	}
	ssize_t n = read(fd, buf, KEY_MAX + 1);
	int e = errno;
	close(fd);
	int rc = 0;
	if (n < 0)
		rc = sbx_err_sys(err, e, "--llm-key-file %s", path);
	else if (n > KEY_MAX)
		rc = sbx_err_set(err, EINVAL,
		                 "--llm-key-file %s: larger than %u "
		                 "bytes",
		                 path, KEY_MAX);
	char *k = buf;
	if (rc == 0) {
		size_t l = (size_t)n;
		while (l && strchr(" \t\r\n", k[l - 1]))
			k[--l] = '\0';
		while (*k == ' ' || *k == '\t')
			k++;
		if (!*k || strpbrk(k, "\r\n"))
			rc = sbx_err_set(err, EINVAL,
			                 "--llm-key-file %s: expected "
			                 "one line, the key",
			                 path);
		else if (asprintf(out, "Authorization: Bearer %s", k) < 0)
			rc = sbx_err_set(err, ENOMEM, "out of memory");
	}
	explicit_bzero(buf, KEY_MAX + 1);
	free(buf);
	return rc;
}

int llm_new(struct loop *l, const struct config *cfg, struct llm **out,
            struct sbx_err *err)
{
	int rc = curl_fns_load("The room assistant (--llm-url)", err);
	if (rc < 0)
		return rc;
	struct llm *c = calloc(1, sizeof(*c));
	if (!c)
		return sbx_err_set(err, ENOMEM, "out of memory");
	c->loop = l;
	c->timeout_ms = cfg->llm_timeout_ms;
	c->url = llm_completions_url(cfg->llm_url);
	c->model = strdup(cfg->llm_model);
	if (!c->url || !c->model) {
		llm_free(c);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	if ((cfg->llm_key_file &&
	     (rc = read_key(cfg->llm_key_file, &c->auth, err)) < 0) ||
	    (rc = curl_loop_new(l, on_done, c, &c->cl, err)) < 0) {
		llm_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void llm_free(struct llm *c)
{
	if (!c)
		return;
	while (c->reqs) {
		struct llm_req *q = c->reqs;
		c->reqs = q->next;
		struct llm_answer a = {.status = LLM_FAILED,
		                       .why = "sandboxd is shutting down"};
		q->done(&a, q->ctx);
		req_free(q);
	}
	curl_loop_free(c->cl);
	free(c->url);
	free(c->model);
	wipe_free(c->auth);
	free(c);
}

int llm_chat(struct llm *c, const struct llm_msg *msgs, size_t n,
             void (*done)(const struct llm_answer *a, void *ctx), void *ctx,
             struct sbx_err *err)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_pack("{s:s, s:s}", "role",
		                                     msgs[i].role, "content",
		                                     msgs[i].content));
	json_t *j = json_pack("{s:s, s:o, s:b}", "model", c->model, "messages",
	                      arr, "stream", 0);
	struct llm_req *q = calloc(1, sizeof(*q));
	if (q) {
		q->c = c;
		q->done = done;
		q->ctx = ctx;
		q->start_ms = now_mono_ms();
		buf_init(&q->answer, 0);
		q->body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	}
	json_decref(j);
	if (!q || !q->body || !(q->easy = curl_easy_init())) {
		if (q)
			req_free(q);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	CURL *e = q->easy;
	q->headers = curl_slist_append(NULL, "Content-Type: application/json");
	q->headers = curl_slist_append(q->headers, "Accept: application/json");
	q->headers = curl_slist_append(q->headers, "Expect:");
	if (c->auth)
		q->headers = curl_slist_append(q->headers, c->auth);
	long connect_ms = c->timeout_ms < 10000 ? (long)c->timeout_ms : 10000L;
	curl_easy_setopt(e, CURLOPT_URL, c->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, q);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->headers);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
	                 (curl_off_t)strlen(q->body));
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, q);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	int rc = curl_loop_add(c->cl, e);
	if (rc < 0) {
		curl_easy_cleanup(e);
		q->easy = NULL;
		req_free(q);
		return sbx_err_set(err, -rc, "curl: cannot add a transfer");
	}
	q->next = c->reqs;
	c->reqs = q;
	return 0;
}
