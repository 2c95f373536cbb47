/* libsbx's plumbing: one HTTP call over the client's libcurl handle.
 *
 * call_run() sends one request and routes the answer by its status: a 2xx
 * body goes to the call's mode (kept in memory, handed to a sink, or parsed
 * as server-sent events); anything else is kept (up to ERR_BODY_MAX) and
 * decoded as the API's {"error", "code"} into struct sbx_error. The same
 * handle serves every call of a client, so keep-alive connections are
 * reused between them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

#define ERR_BODY_MAX (64u << 10)

void sbx_err_set(struct sbx_error *err, int status, const char *code,
                 const char *fmt, ...)
{
	if (!err)
		return;
	err->status = status;
	snprintf(err->code, sizeof(err->code), "%s", code);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

int dbuf_add(struct dbuf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

void dbuf_free(struct dbuf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* ---- server-sent events ---- */

static int sse_dispatch(struct sse *s)
{
	int rc = 0;
	if (s->has_data || s->event[0])
		rc = s->on_event(s->ud, s->event[0] ? s->event : "message",
		                 s->data.data ? s->data.data : "", s->data.len,
		                 s->id);
	s->event[0] = '\0';
	s->has_data = false;
	s->data.len = 0;
	if (s->data.data)
		s->data.data[0] = '\0';
	return rc;
}

static int sse_line(struct sse *s, char *l, size_t n)
{
	if (n && l[n - 1] == '\r')
		l[--n] = '\0';
	if (n == 0)
		return sse_dispatch(s);
	if (l[0] == ':')
		return 0; /* a comment: keepalive */
	char *colon = memchr(l, ':', n);
	const char *v = "";
	size_t vl = 0;
	if (colon) {
		*colon = '\0';
		v = colon + 1;
		if (*v == ' ')
			v++;
		vl = n - (size_t)(v - l);
	}
	if (!strcmp(l, "event")) {
		snprintf(s->event, sizeof(s->event), "%.*s", (int)vl, v);
	} else if (!strcmp(l, "data")) {
		if (s->has_data && dbuf_add(&s->data, "\n", 1))
			return -1;
		if (dbuf_add(&s->data, v, vl))
			return -1;
		s->has_data = true;
	} else if (!strcmp(l, "id")) {
		snprintf(s->id, sizeof(s->id), "%.*s", (int)vl, v);
	}
	return 0;
}

int sse_feed(struct sse *s, const char *p, size_t n)
{
	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;
		if (dbuf_add(&s->line, p, take))
			return -1;
		p += take;
		n -= take;
		if (!nl)
			break;
		p++;
		n--;
		int rc = sse_line(s, s->line.data, s->line.len);
		s->line.len = 0;
		if (rc)
			return rc;
	}
	return 0;
}

void sse_free(struct sse *s)
{
	dbuf_free(&s->line);
	dbuf_free(&s->data);
}

/* ---- base64 ---- */

static const char B64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *b64_encode(const void *p, size_t n)
{
	const unsigned char *in = p;
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		*o++ = B64[v >> 18 & 63];
		*o++ = B64[v >> 12 & 63];
		*o++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? B64[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static int b64_val(char ch)
{
	const char *q = ch ? strchr(B64, ch) : NULL;
	return q ? (int)(q - B64) : -1;
}

ssize_t b64_decode(const char *in, size_t n, unsigned char *out)
{
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		if (in[i] == '=' || in[i] == '\n' || in[i] == '\r')
			continue;
		int v = b64_val(in[i]);
		if (v < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	return (ssize_t)o;
}

/* ---- JSON ---- */

char *jstrdup(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

uint64_t juint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return (uint64_t)json_integer_value(v);
	if (json_is_real(v) && json_real_value(v) > 0)
		return (uint64_t)json_real_value(v);
	return 0;
}

json_t *json_env(const char *const *kv)
{
	json_t *o = json_object();
	for (; kv && *kv; kv++) {
		const char *eq = strchr(*kv, '=');
		if (!eq) {
			json_object_set_new(o, *kv, json_string(""));
			continue;
		}
		char *k = strndup(*kv, (size_t)(eq - *kv));
		if (k)
			json_object_set_new(o, k, json_string(eq + 1));
		free(k);
	}
	return o;
}

/* ---- URLs ---- */

char *url_escape(const char *s, bool keep_slash)
{
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *o = out;
	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch) ||
		    (keep_slash && ch == '/'))
			*o++ = (char)ch;
		else
			o += sprintf(o, "%%%02X", ch);
	}
	*o = '\0';
	return out;
}

char *url_sandbox(struct sbx_client *c, const char *id, const char *fmt, ...)
{
	char *eid = url_escape(id ? id : "", false), *rest = NULL, *url = NULL;
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&rest, fmt, ap);
	va_end(ap);
	if (eid && r >= 0 &&
	    asprintf(&url, "%s/v1/sandbox/%s%s", c->base, eid, rest) < 0)
		url = NULL;
	free(eid);
	if (r >= 0)
		free(rest);
	return url;
}

/* ---- the client ---- */

char *url_sandbox_item(struct sbx_client *c, const char *id, const char *dir,
                       const char *item, const char *rest)
{
	char *e = url_escape(item ? item : "", false);
	char *u = e ? url_sandbox(c, id, "%s/%s%s", dir, e, rest) : NULL;
	free(e);
	return u;
}

struct sbx_client *sbx_client_new(const char *url, const char *token,
                                  struct sbx_error *err)
{
	if (!url || !*url) {
		sbx_err_set(err, 0, "usage", "no daemon URL");
		return NULL;
	}
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		sbx_err_set(err, 0, "usage",
		            "%s: the URL must start with http:// or https://",
		            url);
		return NULL;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct sbx_client *c = calloc(1, sizeof(*c));
	if (!c)
		goto nomem;
	c->base = strdup(url);
	c->curl = curl_easy_init();
	if (!c->base || !c->curl)
		goto nomem;
	size_t n = strlen(c->base);
	while (n > 0 && c->base[n - 1] == '/')
		c->base[--n] = '\0';
	if (token && *token &&
	    asprintf(&c->auth, "Authorization: Bearer %s", token) < 0) {
		c->auth = NULL;
		goto nomem;
	}
	return c;
nomem:
	sbx_client_free(c);
	sbx_err_set(err, 0, "io", "out of memory");
	return NULL;
}

void sbx_client_free(struct sbx_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	if (c->auth) {
		/* a bearer token is a secret: do not leave it in freed memory
		 */
		explicit_bzero(c->auth, strlen(c->auth));
		free(c->auth);
	}
	free(c->base);
	free(c);
}

static bool ok_status(long s)
{
	return s >= 200 && s < 300;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct call *k = ud;
	size_t n = size * nmemb;
	if (!k->started) {
		k->started = true;
		curl_easy_getinfo(k->h, CURLINFO_RESPONSE_CODE, &k->status);
		if (ok_status(k->status) && k->refuse_json) {
			char *ct = NULL;
			curl_easy_getinfo(k->h, CURLINFO_CONTENT_TYPE, &ct);
			if (ct && !strncmp(ct, "application/json", 16)) {
				k->is_dir = true;
				return 0;
			}
		}
	}
	if (!ok_status(k->status)) {
		if (k->resp.len < ERR_BODY_MAX &&
		    dbuf_add(&k->resp, p, n < ERR_BODY_MAX ? n : ERR_BODY_MAX))
			return 0;
		return n;
	}
	switch (k->mode) {
	case CALL_BUFFER:
		return dbuf_add(&k->resp, p, n) ? 0 : n;
	case CALL_SINK:
		if (k->sink(k->sink_ud, p, n)) {
			k->aborted = true;
			return 0;
		}
		return n;
	default:
		if (sse_feed(&k->sse, p, n)) {
			k->aborted = true;
			return 0;
		}
		return n;
	}
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *ud)
{
	struct call *k = ud;
	ssize_t n = k->src(k->src_ud, p, size * nmemb);
	if (n < 0) {
		k->io_error = true;
		return CURL_READFUNC_ABORT;
	}
	return (size_t)n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow)
{
	struct call *k = ud;
	if (k->src)
		k->progress(k->pud, (uint64_t)ulnow, (uint64_t)ultotal);
	else
		k->progress(k->pud, (uint64_t)dlnow, (uint64_t)dltotal);
	return 0;
}

/* The API's error body, or the status line's gist when it has none. */
static void error_from_body(struct call *k, struct sbx_error *err)
{
	json_t *j =
	    k->resp.len ? json_loadb(k->resp.data, k->resp.len, 0, NULL) : NULL;
	json_t *m = json_object_get(j, "error"),
	       *code = json_object_get(j, "code");
	if (json_is_string(m))
		sbx_err_set(err, (int)k->status,
		            json_is_string(code) ? json_string_value(code)
		                                 : "http",
		            "%s", json_string_value(m));
	else
		sbx_err_set(err, (int)k->status, "http", "HTTP %ld%s%.200s",
		            k->status, k->resp.len ? ": " : "",
		            k->resp.len ? k->resp.data : "");
	json_decref(j);
}

int call_run(struct sbx_client *c, struct call *k, struct sbx_error *err)
{
	CURL *h = c->curl;
	struct curl_slist *hdr = NULL;
	char *sess = NULL;
	int rc = -1;
	if (!k->url) {
		sbx_err_set(err, 0, "io", "out of memory");
		return -1;
	}
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, k->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	/* a path is the daemon's to judge: curl must not fold "a/../b" */
	curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, k->method);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "libsbx/" LIBSBX_VERSION);
	if (!strcmp(k->method, "HEAD"))
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	if (c->auth)
		hdr = curl_slist_append(hdr, c->auth);
	if (k->accept) {
		char a[128];
		snprintf(a, sizeof(a), "Accept: %s", k->accept);
		hdr = curl_slist_append(hdr, a);
	}
	if (k->session && asprintf(&sess, "Session-Id: %s", k->session) >= 0)
		hdr = curl_slist_append(hdr, sess);
	/* curl would wait a second for a "100 Continue" before a big body */
	hdr = curl_slist_append(hdr, "Expect:");
	if (k->src) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, k->method);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, k);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
		                 (curl_off_t)k->src_size);
	} else if (k->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, k->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
		                 (curl_off_t)k->body_len);
	}
	if (k->body || k->src) {
		char ct[128];
		snprintf(ct, sizeof(ct), "Content-Type: %s",
		         k->content_type ? k->content_type
		                         : "application/json");
		hdr = curl_slist_append(hdr, ct);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, k);
	if (k->progress) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, k);
	}
	k->h = h;
	k->sse.on_event = k->on_event;
	k->sse.ud = k->ev_ud;

	CURLcode cc = curl_easy_perform(h);
	if (!k->started) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &k->status);
		k->started = true;
	}
	/* an unterminated last event */
	if (cc == CURLE_OK && k->mode == CALL_SSE && ok_status(k->status) &&
	    sse_feed(&k->sse, "\n\n", 2))
		k->aborted = true;
	if (k->is_dir) {
		sbx_err_set(err, 0, "is_a_directory", "is a directory");
	} else if (k->cb_err_set) {
		if (err)
			*err = k->cb_err;
	} else if (k->aborted) {
		sbx_err_set(err, 0, "aborted", "stopped by the caller");
	} else if (k->io_error) {
		sbx_err_set(err, 0, "io", "reading the upload: %s",
		            strerror(errno));
	} else if (k->status >= 300 && (cc == CURLE_OK || k->resp.len)) {
		/* an answer, even one that came while we were still sending
		 * (a refused upload) */
		error_from_body(k, err);
	} else if (cc != CURLE_OK) {
		sbx_err_set(err, 0, "connect", "%s: %s", c->base,
		            curl_easy_strerror(cc));
	} else if (!ok_status(k->status)) {
		error_from_body(k, err);
	} else {
		rc = 0;
	}
	curl_slist_free_all(hdr);
	free(sess);
	free(k->url);
	k->url = NULL;
	sse_free(&k->sse);
	if (rc)
		dbuf_free(&k->resp);
	return rc;
}

int call_whole(struct sbx_client *c, struct call *k, char **body, size_t *len,
               struct sbx_error *err)
{
	k->mode = CALL_BUFFER;
	if (!k->accept)
		k->accept = "application/json";
	int rc = call_run(c, k, err);
	if (rc == 0 && len)
		*len = k->resp.len;
	if (rc == 0 && body) {
		*body = k->resp.data ? k->resp.data : strdup("");
		k->resp.data = NULL;
	}
	dbuf_free(&k->resp);
	return rc;
}

int call_json(struct sbx_client *c, struct call *k, json_t *body, json_t **out,
              struct sbx_error *err)
{
	char *text = NULL, *ans = NULL;
	size_t len = 0;
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		if (!text) {
			free(k->url);
			k->url = NULL;
			sbx_err_set(err, 0, "io", "out of memory");
			return -1;
		}
		k->body = text;
		k->body_len = strlen(text);
	}
	int rc = call_whole(c, k, out ? &ans : NULL, &len, err);
	free(text);
	if (rc == 0 && out) {
		json_error_t je;
		*out = json_loadb(ans ? ans : "", len, 0, &je);
		if (!*out) {
			sbx_err_set(err, (int)k->status, "protocol",
			            "the daemon's answer is not JSON: %s",
			            je.text);
			rc = -1;
		}
	}
	free(ans);
	return rc;
}

int json_call(struct sbx_client *c, const char *method, char *url, json_t *body,
              json_t **out, struct sbx_error *err)
{
	struct call k = {.method = method, .url = url};
	return call_json(c, &k, body, out, err);
}

int json_create(struct sbx_client *c, char *url, json_t *body, const char *what,
                char **idp, struct sbx_error *err)
{
	json_t *ans = NULL;
	if (json_call(c, "POST", url, body, &ans, err))
		return -1;
	*idp = jstrdup(ans, "id");
	json_decref(ans);
	if (!*idp) {
		sbx_err_set(err, 0, "protocol", "the answer has no %s id",
		            what);
		return -1;
	}
	return 0;
}

void *json_array_fill(json_t *arr, size_t size, void (*fill)(void *, json_t *),
                      size_t *n, struct sbx_error *err)
{
	size_t count = json_array_size(arr);
	char *list = calloc(count ? count : 1, size);
	if (!list) {
		sbx_err_set(err, 0, "io", "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < count; i++)
		fill(list + i * size, json_array_get(arr, i));
	*n = count;
	return list;
}

void *json_one_fill(json_t *j, size_t size, void (*fill)(void *, json_t *),
                    const char *what, struct sbx_error *err)
{
	if (!json_is_object(j) || !json_is_string(json_object_get(j, "id"))) {
		sbx_err_set(err, 0, "protocol", "the answer has no %s", what);
		json_decref(j);
		return NULL;
	}
	void *one = calloc(1, size);
	if (one)
		fill(one, j);
	else
		sbx_err_set(err, 0, "io", "out of memory");
	json_decref(j);
	return one;
}

int sbx_request(struct sbx_client *c, const char *method, const char *path,
                const char *json_body, long *status, char **body, size_t *len,
                struct sbx_error *err)
{
	struct call k = {.method = method};
	if (asprintf(&k.url, "%s%s%s", c->base, *path == '/' ? "" : "/", path) <
	    0)
		k.url = NULL;
	if (json_body) {
		k.body = json_body;
		k.body_len = strlen(json_body);
	}
	int rc = call_whole(c, &k, body, len, err);
	if (status)
		*status = k.status;
	return rc;
}
