#include "http/jsonout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lib/base64.h"
#include "lib/jsonesc.h"

#define JSONOUT_MAX 4
#define CHUNK (64u << 10)

struct jsonout {
	/* "@sbx-<nonce>-": a client cannot guess it, so no string of its
	 * own in the document can pass for a placeholder */
	char mark[48];
	size_t mark_len;
	struct buf big[JSONOUT_MAX];
	bool b64[JSONOUT_MAX]; /* sent as base64, not as text */
	size_t nbig;
	char *text; /* the document, with placeholders */
	size_t tlen, at;
	int cur;    /* the big string being sent, or -1 */
	size_t off; /* how much of it is sent */
	struct http_stream *s;
};

struct jsonout *jsonout_new(void)
{
	struct jsonout *o = calloc(1, sizeof(*o));
	unsigned char rnd[12];
	if (!o)
		return NULL;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		free(o);
		return NULL;
	}
	int n = snprintf(o->mark, sizeof(o->mark), "@sbx-");
	for (size_t i = 0; i < sizeof(rnd); i++)
		n += snprintf(o->mark + n, sizeof(o->mark) - (size_t)n, "%02x",
		              rnd[i]);
	o->mark[n++] = '-';
	o->mark_len = (size_t)n;
	o->cur = -1;
	return o;
}

void jsonout_free(struct jsonout *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->nbig; i++)
		buf_free(&o->big[i]);
	free(o->text);
	free(o);
}

/* The length of big string i as sent. */
static size_t sent_len(const struct jsonout *o, size_t i)
{
	const struct buf *b = &o->big[i];
	return o->b64[i] ? base64_encoded_len(b->len)
	                 : jsonesc_len(b->data, b->len);
}

json_t *jsonout_base64(struct jsonout *o, struct buf *b)
{
	json_t *j = jsonout_string(o, b);
	if (j)
		o->b64[o->nbig - 1] = true;
	return j;
}

json_t *jsonout_string(struct jsonout *o, struct buf *b)
{
	char ph[64];
	if (!o || o->nbig == JSONOUT_MAX)
		return NULL;
	snprintf(ph, sizeof(ph), "%s%zu@", o->mark, o->nbig);
	json_t *j = json_string(ph);
	if (!j)
		return NULL;
	o->big[o->nbig++] = *b;
	memset(b, 0, sizeof(*b));
	return j;
}

/* The next placeholder in text from o->at: its position, length and
 * index; false when there is none. */
static bool next_placeholder(struct jsonout *o, size_t *pos, size_t *len,
                             int *idx)
{
	const char *t = o->text + o->at, *end = o->text + o->tlen;
	while (t < end) {
		const char *m =
		    memmem(t, (size_t)(end - t), o->mark, o->mark_len);
		if (!m)
			return false;
		const char *d = m + o->mark_len;
		if (d + 1 < end && d[0] >= '0' && d[0] < '0' + (int)o->nbig &&
		    d[1] == '@') {
			*pos = (size_t)(m - o->text);
			*len = o->mark_len + 2;
			*idx = d[0] - '0';
			return true;
		}
		t = m + 1;
	}
	return false;
}

static void pump(void *ctx)
{
	struct jsonout *o = ctx;
	static char chunk[CHUNK + 1]; /* base64_encode's NUL */
	while (o->s) {
		if (o->cur >= 0) {
			struct buf *b = &o->big[o->cur];
			size_t n;
			if (o->b64[o->cur]) { /* whole groups of 3 but the last
				               */
				size_t raw = b->len - o->off;
				if (raw > sizeof(chunk) / 4 * 3)
					raw = sizeof(chunk) / 4 * 3;
				n = base64_encode(b->data + o->off, raw, chunk);
				o->off += raw;
			} else {
				n = jsonesc_some(b->data, b->len, &o->off,
				                 chunk, sizeof(chunk));
			}
			if (o->off == b->len) {
				buf_free(b); /* sent: its memory goes now */
				o->cur = -1;
			}
			if (http_stream_write(o->s, chunk, n))
				return; /* back when drained */
			continue;
		}
		size_t pos, len;
		int idx;
		if (!next_placeholder(o, &pos, &len, &idx)) {
			http_stream_write(o->s, o->text + o->at,
			                  o->tlen - o->at);
			http_stream_end(o->s);
			o->s = NULL;
			return; /* freed when the stream closes */
		}
		size_t lit = pos - o->at;
		o->at = pos + len;
		o->cur = idx;
		o->off = 0;
		if (lit && http_stream_write(o->s, o->text + pos - lit, lit))
			return;
	}
}

static void closed(void *ctx)
{
	jsonout_free(ctx);
}

void jsonout_respond(struct jsonout *o, struct http_req *r, unsigned status,
                     json_t *doc)
{
	if (!o) {
		json_decref(doc);
		http_respond_json(r, 500,
		                  json_pack("{s:s, s:s}", "error",
		                            "out of memory", "code",
		                            "internal"));
		return;
	}
	o->text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!o->text) {
		jsonout_free(o);
		http_respond_json(r, 500,
		                  json_pack("{s:s, s:s}", "error",
		                            "out of memory", "code",
		                            "internal"));
		return;
	}
	o->tlen = strlen(o->text);
	/* the length: the text less its placeholders, plus each string as
	 * it will be escaped */
	uint64_t size = o->tlen;
	size_t pos, len;
	int idx;
	while (next_placeholder(o, &pos, &len, &idx)) {
		size = size - len + sent_len(o, (size_t)idx);
		o->at = pos + len;
	}
	o->at = 0;
	o->s = http_respond_stream(r, status, "application/json", size, NULL);
	if (!o->s) {
		jsonout_free(o);
		return;
	}
	http_stream_set_cbs(o->s, pump, closed, o);
	pump(o);
}
