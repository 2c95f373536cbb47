/* The S3 client (s3.h). One curl multi handle per client, on the loop
 * (core/curl_loop.h, which loads libcurl only when an S3 store is
 * configured); each request is an easy handle while it runs, and a fresh
 * one for each retry. */
#include "core/s3.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/config.h"
#include "core/curl_loop.h"
#include "lib/buf.h"
#include "lib/sha256.h"
#include "lib/util.h"

#define TRIES 5
#define BACKOFF_MS 200
#define BODY_MAX (16u << 20) /* a collected answer: XML, metadata */

/* ---- configuration ----------------------------------------------------------
 */

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void s3_config_clear(struct s3_config *c)
{
	free(c->endpoint);
	free(c->region);
	free(c->bucket);
	free(c->prefix);
	wipe_free(c->access_key);
	wipe_free(c->secret_key);
	wipe_free(c->session_token);
	memset(c, 0, sizeof(*c));
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

int s3_credentials_parse(const char *text, const char *profile, char **key,
                         char **secret, char **token)
{
	char *copy = strdup(text), *save = NULL;
	bool in = false;
	*key = *secret = *token = NULL;
	if (!copy)
		return -ENOMEM;
	for (char *line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *l = trim(line);
		if (!*l || *l == '#' || *l == ';')
			continue;
		if (*l == '[') {
			char *end = strchr(l, ']');
			if (end) {
				*end = '\0';
				char *name = trim(l + 1);
				/* the config file's style, "profile x", too */
				if (!strncmp(name, "profile ", 8))
					name = trim(name + 8);
				in = !strcmp(name, profile);
			}
			continue;
		}
		char *eq = strchr(l, '=');
		if (!in || !eq)
			continue;
		*eq = '\0';
		char *k = trim(l), *v = trim(eq + 1);
		char **dst = !strcmp(k, "aws_access_key_id")       ? key
		             : !strcmp(k, "aws_secret_access_key") ? secret
		             : !strcmp(k, "aws_session_token")     ? token
		                                                   : NULL;
		if (dst && *v) {
			wipe_free(*dst);
			*dst = strdup(v);
		}
	}
	explicit_bzero(copy, strlen(text));
	free(copy);
	if (!*key || !*secret) {
		wipe_free(*key);
		wipe_free(*secret);
		wipe_free(*token);
		*key = *secret = *token = NULL;
		return -ENOENT;
	}
	return 0;
}

static int load_file(const char *path, const char *profile, struct s3_config *c,
                     struct sbx_err *err)
{
	char buf[65536];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, errno, "S3 credentials file %s", path);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return sbx_err_sys(err, errno, "S3 credentials file %s", path);
	buf[n] = '\0';
	int r = s3_credentials_parse(buf, profile, &c->access_key,
	                             &c->secret_key, &c->session_token);
	explicit_bzero(buf, sizeof(buf));
	if (r == -ENOENT)
		return sbx_err_set(
		    err, EINVAL,
		    "S3 credentials file %s: no aws_access_key_id "
		    "and aws_secret_access_key in [%s]",
		    path, profile);
	return r < 0 ? sbx_err_set(err, -r, "out of memory") : 0;
}

static bool name_ok(const char *s, const char *extra)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr(extra, *s)))
			return false;
	return true;
}

int s3_config_load(const struct config *cfg, struct s3_config *c,
                   struct sbx_err *err)
{
	const char *spec = cfg->backup_s3 + 5; /* after "s3://" */
	const char *slash = strchr(spec, '/');
	const char *env;
	int r;
	memset(c, 0, sizeof(*c));
	c->bucket =
	    slash ? strndup(spec, (size_t)(slash - spec)) : strdup(spec);
	const char *p = slash ? slash + 1 : "";
	size_t pl = strlen(p);
	while (pl && p[pl - 1] == '/')
		pl--;
	if (asprintf(&c->prefix, "%.*s%s", (int)pl, p, pl ? "/" : "") < 0)
		c->prefix = NULL;
	if ((env = cfg->s3_region) || (env = getenv("AWS_REGION")) ||
	    (env = getenv("AWS_DEFAULT_REGION")))
		c->region = strdup(env);
	else
		c->region = strdup("us-east-1");
	if (cfg->s3_endpoint)
		c->endpoint = strdup(cfg->s3_endpoint);
	else if (c->region &&
	         asprintf(&c->endpoint, "https://s3.%s.amazonaws.com",
	                  c->region) < 0)
		c->endpoint = NULL;
	if (!c->bucket || !c->prefix || !c->region || !c->endpoint) {
		s3_config_clear(c);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	size_t el = strlen(c->endpoint);
	while (el && c->endpoint[el - 1] == '/')
		c->endpoint[--el] = '\0';
	if (strlen(c->bucket) < 3 || strlen(c->bucket) > 63 ||
	    !name_ok(c->bucket, ".-") || !name_ok(c->prefix, "._/-") ||
	    strstr(c->prefix, "..") || strstr(c->prefix, "//") ||
	    !name_ok(c->region, "-")) {
		r = sbx_err_set(
		    err, EINVAL,
		    "--backup-s3 %s: a bucket of 3-63 of [a-z0-9.-] "
		    "and a prefix of [A-Za-z0-9._/-]",
		    cfg->backup_s3);
		s3_config_clear(c);
		return r;
	}
	/* auto: a bucket name cannot go in front of an address */
	const char *host = strstr(c->endpoint, "://") + 3;
	bool literal = (*host >= '0' && *host <= '9') || *host == '[' ||
	               !strncmp(host, "localhost", 9);
	c->path_style = cfg->s3_addressing == CONFIG_S3_PATH ||
	                (cfg->s3_addressing == CONFIG_S3_AUTO && literal);
	const char *profile = getenv("AWS_PROFILE");
	if (!profile || !*profile)
		profile = "default";
	if (cfg->s3_credentials_file) {
		r = load_file(cfg->s3_credentials_file, profile, c, err);
	} else if (getenv("AWS_ACCESS_KEY_ID") &&
	           getenv("AWS_SECRET_ACCESS_KEY")) {
		c->access_key = strdup(getenv("AWS_ACCESS_KEY_ID"));
		c->secret_key = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
		if ((env = getenv("AWS_SESSION_TOKEN")) && *env)
			c->session_token = strdup(env);
		r = c->access_key && c->secret_key
		        ? 0
		        : sbx_err_set(err, ENOMEM, "out of memory");
	} else {
		char path[4200];
		if ((env = getenv("AWS_SHARED_CREDENTIALS_FILE")) && *env)
			snprintf(path, sizeof(path), "%s", env);
		else
			snprintf(path, sizeof(path), "%s/.aws/credentials",
			         getenv("HOME") ? getenv("HOME") : "/root");
		r = access(path, R_OK) == 0
		        ? load_file(path, profile, c, err)
		        : sbx_err_set(err, EINVAL,
		                      "no S3 credentials: give "
		                      "--s3-credentials-file, or set "
		                      "AWS_ACCESS_KEY_ID and "
		                      "AWS_SECRET_ACCESS_KEY, or write %s",
		                      path);
	}
	if (r == 0 &&
	    (strchr(c->access_key, ':') || strchr(c->access_key, '\n') ||
	     strchr(c->secret_key, '\n')))
		r = sbx_err_set(err, EINVAL,
		                "S3 credentials: a key with ':' or "
		                "a line break");
	if (r < 0)
		s3_config_clear(c);
	return r;
}

/* ---- small helpers
 * ------------------------------------------------------------ */

char *s3_query_add(char *q, const char *name, const char *value)
{
	/* RFC 3986: unreserved characters as they are, the rest %XX */
	static const char hex[] = "0123456789ABCDEF";
	size_t vl = strlen(value);
	char *v = malloc(vl * 3 + 1), *o = v;
	char *out = NULL;
	if (v) {
		for (const unsigned char *p = (const unsigned char *)value; *p;
		     p++) {
			if ((*p >= 'A' && *p <= 'Z') ||
			    (*p >= 'a' && *p <= 'z') ||
			    (*p >= '0' && *p <= '9') || *p == '-' ||
			    *p == '.' || *p == '_' || *p == '~') {
				*o++ = (char)*p;
			} else {
				*o++ = '%';
				*o++ = hex[*p >> 4];
				*o++ = hex[*p & 15];
			}
		}
		*o = '\0';
		if (asprintf(&out, "%s%s%s=%s", q ? q : "", q ? "&" : "", name,
		             v) < 0)
			out = NULL;
	}
	free(v);
	free(q);
	return out;
}

static void entity_decode(char *s)
{
	static const struct {
		const char *e;
		char c;
	} ents[] = {{"&quot;", '"'}, {"&amp;", '&'},   {"&lt;", '<'},
	            {"&gt;", '>'},   {"&apos;", '\''}, {"&#34;", '"'}};
	char *w = s;
	for (const char *r = s; *r;) {
		bool done = false;
		if (*r == '&')
			for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]);
			     i++) {
				size_t l = strlen(ents[i].e);
				if (!strncmp(r, ents[i].e, l)) {
					*w++ = ents[i].c;
					r += l;
					done = true;
					break;
				}
			}
		if (!done)
			*w++ = *r++;
	}
	*w = '\0';
}

char *s3_xml_next(const char *xml, size_t len, const char *tag, size_t *pos)
{
	char open[80], close[80];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	size_t ol = strlen(open), cl = strlen(close);
	for (size_t i = *pos; i + ol <= len; i++) {
		if (memcmp(xml + i, open, ol))
			continue;
		size_t start = i + ol;
		for (size_t j = start; j + cl <= len; j++) {
			if (memcmp(xml + j, close, cl))
				continue;
			char *v = strndup(xml + start, j - start);
			if (v)
				entity_decode(v);
			*pos = j + cl;
			return v;
		}
		return NULL;
	}
	return NULL;
}

/* ---- the client
 * --------------------------------------------------------------- */

struct s3_client {
	struct loop *loop;
	struct s3_config cfg;
	struct curl_loop *cl;
	struct loop_timer retry_timer, resume_timer;
	char *userpwd;  /* "key:secret" for curl's SigV4 */
	char sigv4[96]; /* "aws:amz:<region>:s3" */
	struct s3_req *reqs;
	bool closing;
};

struct s3_req {
	struct s3_client *c;
	struct s3_req_opts o;
	char *method, *url, *key; /* our copies */
	char payload_hash[SHA256_HEX_LEN + 1];
	CURL *easy;
	struct curl_slist *headers;
	size_t sent;        /* of the body, this try */
	uint64_t delivered; /* streamed bytes handed on, all tries */
	struct buf body;    /* collected answer */
	char etag[128];
	uint64_t skip; /* a retried read the server sent whole */
	bool first_data;
	int tries;
	bool paused, want_resume;
	uint64_t retry_at; /* monotonic ms; 0: not waiting */
	struct s3_req *next;
};

const struct s3_config *s3_client_config(const struct s3_client *c)
{
	return &c->cfg;
}

static void on_resume(struct loop_timer *t);

static size_t read_cb(char *out, size_t size, size_t n, void *ud)
{
	struct s3_req *r = ud;
	size_t want = size * n, left = r->o.body_len - r->sent;
	size_t k = want < left ? want : left;
	memcpy(out, r->o.body + r->sent, k);
	r->sent += k;
	return k;
}

static size_t write_cb(char *p, size_t size, size_t n, void *ud)
{
	struct s3_req *r = ud;
	size_t len = size * n;
	long status = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	/* an error's body (XML) is kept, whatever the request */
	if (!r->o.on_data || status < 200 || status > 299) {
		if (r->body.len + len > BODY_MAX)
			return 0; /* too big for an answer: fail it */
		buf_append(&r->body, p, len);
		return len;
	}
	if (r->paused)
		return CURL_WRITEFUNC_PAUSE; /* kept by curl until resumed */
	if (r->first_data) {
		/* a Range the server ignored (200, not 206): what was
		 * delivered before comes again, and is skipped */
		r->first_data = false;
		if (status == 206)
			r->skip = 0;
	}
	if (r->skip) {
		size_t k = r->skip < len ? (size_t)r->skip : len;
		r->skip -= k;
		p += k;
		if (k == len)
			return len;
		len -= k;
		size_t taken = k;
		r->delivered += len;
		if (r->o.on_data(r->o.ctx, p, len) == 1)
			r->paused = true;
		return taken + len;
	}
	r->delivered += len;
	if (r->o.on_data(r->o.ctx, p, len) == 1)
		r->paused = true;
	return len;
}

static size_t header_cb(char *p, size_t size, size_t n, void *ud)
{
	struct s3_req *r = ud;
	size_t len = size * n;
	if (len > 5 && !strncasecmp(p, "etag:", 5)) {
		const char *v = p + 5;
		while (*v == ' ')
			v++;
		size_t vl = len - (size_t)(v - p);
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
			vl--;
		snprintf(r->etag, sizeof(r->etag), "%.*s", (int)vl, v);
	}
	return len;
}

static int start_try(struct s3_req *r, struct sbx_err *err)
{
	struct s3_client *c = r->c;
	char h[256];
	CURL *e = curl_easy_init();
	if (!e)
		return sbx_err_set(err, ENOMEM, "curl: out of memory");
	r->easy = e;
	r->sent = 0;
	r->first_data = true;
	r->skip = r->o.range_from + r->delivered; /* unless a 206 answers */
	buf_reset(&r->body);
	r->etag[0] = '\0';
	curl_slist_free_all(r->headers);
	r->headers = NULL;
	snprintf(h, sizeof(h), "x-amz-content-sha256: %s", r->payload_hash);
	r->headers = curl_slist_append(r->headers, h);
	r->headers = curl_slist_append(r->headers, "Expect:");
	if (c->cfg.session_token) {
		char *t;
		if (asprintf(&t, "x-amz-security-token: %s",
		             c->cfg.session_token) >= 0) {
			r->headers = curl_slist_append(r->headers, t);
			wipe_free(t);
		}
	}
	uint64_t from = r->o.range_from + r->delivered;
	if (!strcmp(r->method, "GET") && from) {
		snprintf(h, sizeof(h), "Range: bytes=%llu-",
		         (unsigned long long)from);
		r->headers = curl_slist_append(r->headers, h);
	}
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	curl_easy_setopt(e, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(e, CURLOPT_USERPWD, c->userpwd);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	/* a stalled transfer (no byte for a minute) fails, and is retried */
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (!strcmp(r->method, "PUT")) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
		                 (curl_off_t)r->o.body_len);
	} else if (!strcmp(r->method, "POST")) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS,
		                 r->o.body ? r->o.body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
		                 (curl_off_t)r->o.body_len);
	} else if (!strcmp(r->method, "HEAD")) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "GET")) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	}
	int rc = curl_loop_add(c->cl, e);
	if (rc < 0) {
		curl_easy_cleanup(e);
		r->easy = NULL;
		return sbx_err_set(err, -rc, "curl: cannot add a transfer");
	}
	return 0;
}

static void req_unlink(struct s3_req *r)
{
	for (struct s3_req **p = &r->c->reqs; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			return;
		}
}

static void req_free(struct s3_req *r)
{
	if (r->easy) {
		curl_loop_remove(r->c->cl, r->easy);
		curl_easy_cleanup(r->easy);
	}
	curl_slist_free_all(r->headers);
	buf_free(&r->body);
	free(r->method);
	free(r->url);
	free(r->key);
	free(r);
}

static void arm_retry(struct s3_client *c)
{
	uint64_t next = 0;
	for (struct s3_req *r = c->reqs; r; r = r->next)
		if (r->retry_at && (!next || r->retry_at < next))
			next = r->retry_at;
	if (next) {
		uint64_t now = now_mono_ms();
		loop_timer_start(c->loop, &c->retry_timer,
		                 next > now ? next - now : 0);
	} else {
		loop_timer_stop(c->loop, &c->retry_timer);
	}
}

static void finish(struct s3_req *r, long status, const struct sbx_err *err)
{
	struct s3_resp resp = {.status = status,
	                       .err = err,
	                       .body = buf_cstr(&r->body),
	                       .body_len = r->body.len,
	                       .etag = r->etag};
	req_unlink(r);
	r->o.on_done(r->o.ctx, &resp);
	req_free(r);
}

/* What S3 said, as an error: its Code and Message. */
static void s3_error(struct s3_req *r, long status, struct sbx_err *err)
{
	size_t pos = 0;
	char *code = s3_xml_next(r->body.data ? r->body.data : "", r->body.len,
	                         "Code", &pos);
	pos = 0;
	char *msg = s3_xml_next(r->body.data ? r->body.data : "", r->body.len,
	                        "Message", &pos);
	int e = status == 403 || status == 401 ? EKEYREJECTED
	        : status == 404 && !(code && !strcmp(code, "NoSuchBucket"))
	            ? ENOENT
	        : status >= 500 || status == 429 ||
	                (code && !strcmp(code, "NoSuchBucket"))
	            ? EREMOTEIO
	            : EIO;
	sbx_err_set(err, e, "S3 %s/%s: %s %s: HTTP %ld %s%s%s",
	            r->c->cfg.endpoint, r->c->cfg.bucket, r->method,
	            r->o.key ? r->o.key : "(bucket)", status, code ? code : "",
	            msg ? ": " : "", msg ? msg : "");
	free(code);
	free(msg);
}

static bool retryable(CURLcode cc, long status)
{
	if (cc != CURLE_OK)
		return cc != CURLE_WRITE_ERROR &&
		       cc != CURLE_ABORTED_BY_CALLBACK &&
		       cc != CURLE_OUT_OF_MEMORY;
	return status >= 500 || status == 429;
}

static void on_try_done(struct s3_req *r, CURLcode cc)
{
	struct s3_client *c = r->c;
	struct sbx_err err = {0};
	long status = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_loop_remove(c->cl, r->easy);
	curl_easy_cleanup(r->easy);
	r->easy = NULL;
	r->paused = false;
	if (cc == CURLE_OK && status >= 200 && status <= 299) {
		finish(r, status, NULL);
		return;
	}
	if (retryable(cc, status) && ++r->tries < TRIES) {
		/* 0.2 s, 0.4, 0.8, 1.6, each +-25% */
		uint64_t d = (uint64_t)BACKOFF_MS << (r->tries - 1);
		unsigned rnd = 0;
		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
			rnd = (unsigned)now_mono_ms();
		d = d * 3 / 4 + rnd % (d / 2 + 1);
		r->retry_at = now_mono_ms() + d;
		arm_retry(c);
		return;
	}
	if (cc != CURLE_OK)
		sbx_err_set(&err, EREMOTEIO, "S3 %s: %s %s: %s%s",
		            c->cfg.endpoint, r->method,
		            r->o.key ? r->o.key : "(bucket)",
		            curl_easy_strerror(cc),
		            r->tries > 1 ? " (after retries)" : "");
	else
		s3_error(r, status, &err);
	finish(r, status, &err);
}

static void on_retry(struct loop_timer *t)
{
	struct s3_client *c = t->data;
	uint64_t now = now_mono_ms();
	struct s3_req *due;
	do {
		due = NULL;
		for (struct s3_req *r = c->reqs; r; r = r->next)
			if (r->retry_at && r->retry_at <= now) {
				due = r;
				break;
			}
		if (due) {
			struct sbx_err err = {0};
			due->retry_at = 0;
			if (start_try(due, &err) < 0)
				finish(due, 0, &err);
		}
	} while (due);
	arm_retry(c);
	/* curl may want its timer now for the new transfers */
	curl_loop_kick(c->cl);
}

static void on_curl_done(CURL *easy, CURLcode result, void *data)
{
	struct s3_req *r = NULL;
	(void)data;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
	if (r)
		on_try_done(r, result);
}

int s3_client_new(struct loop *loop, struct s3_config *cfg,
                  struct s3_client **out, struct sbx_err *err)
{
	int lr = curl_fns_load("S3 backups", err);
	if (lr < 0)
		return lr;
	struct s3_client *c = calloc(1, sizeof(*c));
	if (!c)
		return sbx_err_set(err, ENOMEM, "out of memory");
	c->loop = loop;
	c->cfg = *cfg; /* taken */
	memset(cfg, 0, sizeof(*cfg));
	if (curl_loop_new(loop, on_curl_done, c, &c->cl, err) < 0) {
		s3_config_clear(&c->cfg);
		free(c);
		return -ENOMEM;
	}
	if (asprintf(&c->userpwd, "%s:%s", c->cfg.access_key,
	             c->cfg.secret_key) < 0) {
		c->userpwd = NULL;
		s3_client_free(c);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	snprintf(c->sigv4, sizeof(c->sigv4), "aws:amz:%s:s3", c->cfg.region);
	c->retry_timer = (struct loop_timer){.cb = on_retry, .data = c};
	c->resume_timer = (struct loop_timer){.cb = on_resume, .data = c};
	*out = c;
	return 0;
}

void s3_client_free(struct s3_client *c)
{
	if (!c)
		return;
	/* every request still running ends now, with ECANCELED, so that its
	 * owner can let go of what it holds; none can start meanwhile */
	c->closing = true;
	while (c->reqs) {
		struct s3_req *r = c->reqs;
		struct sbx_err err = {0};
		sbx_err_set(&err, ECANCELED, "sandboxd is shutting down");
		struct s3_resp resp = {.err = &err, .body = "", .etag = ""};
		c->reqs = r->next;
		r->o.on_done(r->o.ctx, &resp);
		req_free(r);
	}
	loop_timer_stop(c->loop, &c->retry_timer);
	loop_timer_stop(c->loop, &c->resume_timer);
	curl_loop_free(c->cl); /* REMOVEs its sockets */
	wipe_free(c->userpwd);
	s3_config_clear(&c->cfg);
	free(c);
}

int s3_request(struct s3_client *c, const struct s3_req_opts *o,
               struct s3_req **out, struct sbx_err *err)
{
	const struct s3_config *cfg = &c->cfg;
	if (c->closing)
		return sbx_err_set(err, ECANCELED, "sandboxd is shutting down");
	struct s3_req *r = calloc(1, sizeof(*r));
	if (!r)
		return sbx_err_set(err, ENOMEM, "out of memory");
	r->c = c;
	r->o = *o;
	buf_init(&r->body, 0);
	r->method = strdup(o->method);
	/* the caller's strings may go before we do (an abort nobody waits
	 * for); the body is documented to stay */
	r->key = o->key ? strdup(o->key) : NULL;
	r->o.key = r->key;
	r->o.query = NULL;
	const char *scheme_end = strstr(cfg->endpoint, "://") + 3;
	int n;
	if (cfg->path_style)
		n = asprintf(&r->url, "%s/%s/%s%s%s%s", cfg->endpoint,
		             cfg->bucket, o->key ? cfg->prefix : "",
		             o->key ? o->key : "", o->query ? "?" : "",
		             o->query ? o->query : "");
	else
		n = asprintf(&r->url, "%.*s%s.%s/%s%s%s%s",
		             (int)(scheme_end - cfg->endpoint), cfg->endpoint,
		             cfg->bucket, scheme_end, o->key ? cfg->prefix : "",
		             o->key ? o->key : "", o->query ? "?" : "",
		             o->query ? o->query : "");
	if (n < 0)
		r->url = NULL;
	if (!r->method || !r->url || (o->key && !r->key)) {
		req_free(r);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	sha256_hex(o->body ? o->body : "", o->body ? o->body_len : 0,
	           r->payload_hash);
	int e = start_try(r, err);
	if (e < 0) {
		req_free(r);
		return e;
	}
	r->next = c->reqs;
	c->reqs = r;
	if (out)
		*out = r;
	return 0;
}

/* Unpausing is done from the loop, never inside the caller's callback:
 * curl may hand over what it kept, or finish the request, right then. */
static void on_resume(struct loop_timer *t)
{
	struct s3_client *c = t->data;
	bool any = false;
	for (struct s3_req *r = c->reqs; r; r = r->next) {
		if (!r->want_resume)
			continue;
		r->want_resume = false;
		if (r->easy) {
			curl_easy_pause(r->easy, CURLPAUSE_CONT);
			any = true;
		}
	}
	if (any)
		curl_loop_kick(c->cl);
}

void s3_req_resume(struct s3_req *r)
{
	if (!r->paused)
		return;
	r->paused = false;
	r->want_resume = true;
	loop_timer_start(r->c->loop, &r->c->resume_timer, 0);
}

void s3_req_cancel(struct s3_req *r)
{
	struct s3_client *c = r->c;
	req_unlink(r);
	req_free(r);
	arm_retry(c);
}
