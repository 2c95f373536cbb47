/* An S3 client for the backup store, on libcurl driven by the daemon's own
 * event loop: curl's multi interface tells us which sockets to watch and
 * when to wake it (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION), the
 * loop tells curl what happened; no thread, no blocking call. Requests are
 * signed with curl's AWS SigV4 (CURLOPT_AWS_SIGV4) and carry the sha256 of
 * their body (x-amz-content-sha256), so strict servers accept them.
 *
 * A request that fails on the way (no connection, a reset, a 5xx, 429) is
 * tried again after a backoff (0.2 s doubling, with jitter, 5 tries in
 * all); a streamed read that broke off resumes where it was (Range). What
 * is finally reported is a sbx_err with an errno (EKEYREJECTED: the store
 * refused our credentials; ENOENT: no such key; EREMOTEIO: unreachable or
 * failing) and a message that names the store, never a secret.
 *
 * Credentials live only in this process's memory (curl's handle and the
 * config, wiped when freed); they are never logged or answered. */
#ifndef SBX_S3_H
#define SBX_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "lib/loop.h"

struct config;

struct s3_config {
	char *endpoint; /* scheme://host[:port], no trailing slash */
	char *region;
	char *bucket;
	char *prefix;    /* "" or "a/b/" */
	bool path_style; /* host/bucket/key, else bucket.host/key */
	char *access_key, *secret_key, *session_token;
};

/* From the daemon's flags and the environment (config.c's help says
 * where credentials come from). */
int s3_config_load(const struct config *cfg, struct s3_config *out,
                   struct sbx_err *err);
/* Free it, secrets wiped first. */
void s3_config_clear(struct s3_config *c);

/* The [profile] section of an AWS shared-credentials file: 0 with key and
 * secret (and token, or NULL) allocated, -ENOENT when it has none. */
int s3_credentials_parse(const char *text, const char *profile, char **key,
                         char **secret, char **token);
/* The text of the first <tag>...</tag> in xml[0..len) from *pos on
 * (entities decoded), allocated; *pos moves past it. NULL when none. */
char *s3_xml_next(const char *xml, size_t len, const char *tag, size_t *pos);

struct s3_client;
struct s3_req;

struct s3_resp {
	long status;               /* 0: no HTTP answer */
	const struct sbx_err *err; /* NULL: a 2xx */
	const char *body;          /* collected (not streamed) requests */
	size_t body_len;
	const char *etag; /* the ETag header, or "" */
};

struct s3_req_opts {
	const char *method; /* GET PUT POST DELETE HEAD */
	const char *key;    /* below the prefix; NULL: the bucket */
	const char *query;  /* canonical (sorted, encoded), or NULL */
	const char *body;   /* kept by the caller until on_done */
	size_t body_len;
	uint64_t range_from; /* GET: from this byte on */
	/* GET: the body as it comes (return 1 to pause until
	 * s3_req_resume); NULL: collected into s3_resp.body */
	int (*on_data)(void *ctx, const char *p, size_t n);
	void (*on_done)(void *ctx, const struct s3_resp *resp);
	void *ctx;
};

int s3_client_new(struct loop *loop, struct s3_config *cfg,
                  struct s3_client **out, struct sbx_err *err);
/* Every request still running ends (its on_done with ECANCELED, during
 * this call, when no new request can start). */
void s3_client_free(struct s3_client *c);
const struct s3_config *s3_client_config(const struct s3_client *c);

/* on_done runs exactly once (never before this returns), unless
 * cancelled. */
int s3_request(struct s3_client *c, const struct s3_req_opts *o,
               struct s3_req **out, struct sbx_err *err);
void s3_req_resume(struct s3_req *r);
/* No callback after this. */
void s3_req_cancel(struct s3_req *r);
/* "a=b" with b escaped as SigV4 wants (RFC 3986), appended to q (an
 * allocated string or NULL) with '&'. NULL on no memory. */
char *s3_query_add(char *q, const char *name, const char *value);

#endif
