/* The executor of AI agents (agent.h).
 *
 * Theory of operation. agent_cmd_run submits the command to exec.c with an
 * on_output callback, so the output never lands in exec's capped buffers
 * (which keep the first bytes): each stream goes into a head buffer that
 * stops after head_chars characters' worth of bytes, and a tail buffer
 * that keeps the last tail_chars characters' worth (compacted when it has
 * grown to twice that). At the end both are read as UTF-8 and cut at
 * character boundaries. A UTF-8 character is at most 4 bytes, so 4 * (n +
 * 1) bytes always hold n whole characters.
 *
 * agent_run_tags walks the <run> tags of an answer one at a time: each
 * command is submitted when the previous one is done (the room's default
 * session runs them in order anyway), and the sandbox is looked up again
 * for each, so a room deleted in between is made anew, as a new exec would.
 * exec may call done before it returns: the walk is a loop that such a
 * callback only restarts, never a recursion as deep as the answer has tags. */
#include "core/agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/util.h"

/* ---- keeping the ends of a stream ---------------------------------------- */

void agent_keep_init(struct agent_keep *k, size_t head_chars, size_t tail_chars)
{
	memset(k, 0, sizeof(*k));
	k->head_max = head_chars ? 4 * (head_chars + 1) : 0;
	k->tail_max = tail_chars ? 4 * (tail_chars + 1) : 0;
	buf_init(&k->head, k->head_max);
	buf_init(&k->tail, 0);
}

void agent_keep_free(struct agent_keep *k)
{
	buf_free(&k->head);
	buf_free(&k->tail);
}

int agent_keep_add(struct agent_keep *k, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)p[i] & 0xC0) != 0x80)
			k->chars++;
	if (k->head_max && k->head.len < k->head_max &&
	    buf_append(&k->head, p, n) < 0)
		return -ENOMEM;
	if (!k->tail_max)
		return 0;
	if (n >= k->tail_max) {
		k->tail_dropped =
		    k->tail_dropped || k->tail.len || n > k->tail_max;
		buf_reset(&k->tail);
		return buf_append(&k->tail, p + n - k->tail_max, k->tail_max);
	}
	if (buf_append(&k->tail, p, n) < 0)
		return -ENOMEM;
	if (k->tail.len > 2 * k->tail_max) {
		size_t drop = k->tail.len - k->tail_max;
		memmove(k->tail.data, k->tail.data + drop, k->tail_max);
		k->tail.len = k->tail_max;
		k->tail_dropped = true;
	}
	return 0;
}

/* s[0..len) as valid UTF-8 (allocated); *chars gets its characters. */
static char *sanitize(const char *s, size_t len, size_t *chars)
{
	char *o = malloc(3 * len + 1);
	if (!o)
		return NULL;
	size_t n = utf8_sanitize(s ? s : "", len, o);
	o[n] = '\0';
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)o[i] & 0xC0) != 0x80)
			c++;
	*chars = c;
	return o;
}

/* Byte offset of character number idx of valid UTF-8 s (its length when
 * it has fewer). */
static size_t char_offset(const char *s, size_t idx)
{
	size_t i = 0, c = 0;
	for (; s[i]; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80 && c++ == idx)
			return i;
	return i;
}

int agent_keep_finish(struct agent_keep *k, size_t head_chars,
                      size_t tail_chars, struct agent_stream *st)
{
	size_t c;
	memset(st, 0, sizeof(*st));
	st->chars = k->chars;
	if (!(st->head = sanitize(k->head.data, k->head.len, &c)))
		return -ENOMEM;
	st->head[char_offset(st->head, head_chars)] = '\0';
	const char *t = k->tail.data ? k->tail.data : "";
	size_t tl = k->tail.len;
	if (k->tail_dropped) /* the front may be the end of a character */
		for (int i = 0;
		     i < 3 && tl && ((unsigned char)*t & 0xC0) == 0x80; i++)
			t++, tl--;
	char *tail = sanitize(t, tl, &c);
	if (!tail)
		return -ENOMEM;
	st->cut = k->tail_dropped || c > tail_chars;
	if (c > tail_chars)
		memmove(tail, tail + char_offset(tail, c - tail_chars),
		        strlen(tail + char_offset(tail, c - tail_chars)) + 1);
	st->tail = tail;
	return 0;
}

/* ---- one command --------------------------------------------------------- */

struct agent_cmd {
	struct exec_job *job;
	struct agent_cmd_opts o;
	struct agent_keep out, err;
	bool oom;
	struct agent_cmd **outp; /* the caller's *out while it is submitted */
	agent_cmd_done_cb done;
	void *ctx;
};

static int cmd_output(void *ctx, int fd, const char *data, size_t len)
{
	struct agent_cmd *c = ctx;
	if (agent_keep_add(fd == 2 ? &c->err : &c->out, data, len) < 0)
		c->oom = true;
	return 0;
}

static void cmd_done(const struct exec_result *res, void *ctx)
{
	struct agent_cmd *c = ctx;
	struct agent_cmd_result r = {.failure = res->failure,
	                             .msg = res->msg,
	                             .exit_code = res->exit_code,
	                             .timed_out = res->failure == EXEC_TIMEOUT,
	                             .duration_ms = res->duration_ms};
	if (agent_keep_finish(&c->out, c->o.head_chars, c->o.tail_chars,
	                      &r.out) < 0 ||
	    agent_keep_finish(&c->err, c->o.head_chars, c->o.tail_chars,
	                      &r.err) < 0 ||
	    c->oom) {
		r.failure = EXEC_NOT_STARTED;
		r.msg = "out of memory";
	}
	if (!r.out.head)
		r.out.head = strdup("");
	if (!r.err.head)
		r.err.head = strdup("");
	c->job = NULL;
	if (c->outp) /* done before agent_cmd_run returned: c is gone */
		*c->outp = NULL;
	c->done(&r, c->ctx);
	free(r.out.head);
	free(r.out.tail);
	free(r.err.head);
	free(r.err.tail);
	agent_keep_free(&c->out);
	agent_keep_free(&c->err);
	free(c);
}

int agent_cmd_run(struct sandbox *sb, const struct agent_cmd_opts *o,
                  agent_cmd_done_cb done, void *ctx, struct agent_cmd **out,
                  struct sbx_err *err)
{
	struct agent_cmd *c = calloc(1, sizeof(*c));
	if (!c)
		return sbx_err_set(err, ENOMEM, "out of memory");
	c->o = *o;
	c->done = done;
	c->ctx = ctx;
	agent_keep_init(&c->out, o->head_chars, o->tail_chars);
	agent_keep_init(&c->err, o->head_chars, o->tail_chars);
	struct exec_params p = {.command = o->command,
	                        .cwd = o->cwd,
	                        .timeout_ms = o->timeout_ms,
	                        .on_output = cmd_output};
	struct agent_cmd *self = c;
	c->outp = &self;
	/* done may run in here: c is then gone, and self NULL */
	int r = exec_submit(sb, o->sess, &p, cmd_done, c, &c->job, err);
	if (r < 0) {
		agent_keep_free(&c->out);
		agent_keep_free(&c->err);
		free(c);
		self = NULL;
	} else if (self) {
		c->outp = NULL;
	}
	if (out)
		*out = self;
	return r;
}

void agent_cmd_cancel(struct agent_cmd *c)
{
	if (c && c->job)
		exec_cancel(c->job);
}

char *agent_not_found_name(int exit_code, const char *s, size_t len)
{
	static const char tail[] = ": command not found";
	if (exit_code != 127 || !len)
		return NULL;
	const char *hit = NULL;
	for (const char *p = s;
	     (p = memmem(p, len - (size_t)(p - s), tail, sizeof(tail) - 1));
	     p++)
		hit = p;
	if (!hit)
		return NULL;
	const char *start = hit;
	while (start > s && start[-1] != '\n' &&
	       !(start - 2 >= s && start[-2] == ':' && start[-1] == ' '))
		start--;
	return strndup(start, (size_t)(hit - start));
}

char *agent_cmd_error(const struct agent_cmd_result *res)
{
	char *name, *s = NULL;
	if (res->failure == EXEC_TIMEOUT)
		return strdup("timeout");
	if (res->failure != EXEC_OK)
		return strdup(res->msg && *res->msg ? res->msg : "failed");
	const char *e = res->err.tail ? res->err.tail : res->err.head;
	if (!(name = agent_not_found_name(res->exit_code, e, strlen(e))))
		return NULL;
	if (asprintf(&s, "command not found: %s", name) < 0)
		s = NULL;
	free(name);
	return s;
}

/* ---- the <run> tags ------------------------------------------------------ */

int agent_tag_next(const char *s, size_t len, size_t *pos, const char **cmd,
                   size_t *cmd_len)
{
	static const char open[] = "<run>", close[] = "</run>";
	if (*pos > len)
		return 0;
	const char *o = memmem(s + *pos, len - *pos, open, sizeof(open) - 1);
	if (!o)
		return 0;
	const char *body = o + sizeof(open) - 1;
	const char *c =
	    memmem(body, len - (size_t)(body - s), close, sizeof(close) - 1);
	if (!c)
		return 0; /* no tag ends after this one starts: none at all */
	*cmd = body;
	*cmd_len = (size_t)(c - body);
	*pos = (size_t)(c - s) + sizeof(close) - 1;
	return 1;
}

/* What JavaScript's trim() removes: WhiteSpace and LineTerminator. */
static size_t js_space(const unsigned char *p, size_t left)
{
	if (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		return 1;
	if (left >= 2 && p[0] == 0xC2 && p[1] == 0xA0) /* U+00A0 */
		return 2;
	if (left >= 3 && p[0] == 0xE1 && p[1] == 0x9A && p[2] == 0x80)
		return 3; /* U+1680 */
	if (left >= 3 && p[0] == 0xE2 && p[1] == 0x80 &&
	    ((p[2] >= 0x80 && p[2] <= 0x8A) || p[2] == 0xA8 || p[2] == 0xA9 ||
	     p[2] == 0xAF))
		return 3; /* U+2000-200A, U+2028, U+2029, U+202F */
	if (left >= 3 && p[0] == 0xE2 && p[1] == 0x81 && p[2] == 0x9F)
		return 3; /* U+205F */
	if (left >= 3 && p[0] == 0xE3 && p[1] == 0x80 && p[2] == 0x80)
		return 3; /* U+3000 */
	if (left >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF)
		return 3; /* U+FEFF */
	return 0;
}

static size_t js_space_before(const unsigned char *s, size_t end)
{
	for (size_t k = 1; k <= 3 && k <= end; k++) {
		size_t n = js_space(s + end - k, k);
		if (n == k)
			return k;
	}
	return 0;
}

void agent_trim(const char **s, size_t *len)
{
	const unsigned char *p = (const unsigned char *)*s;
	size_t n = *len, k;
	while (n && (k = js_space(p, n))) {
		p += k;
		n -= k;
	}
	while (n && (k = js_space_before(p, n)))
		n -= k;
	*s = (const char *)p;
	*len = n;
}

int agent_summary(struct buf *b, const char *cmd, const char *out_head,
                  const char *err_head, const char *error)
{
	if (error)
		return buf_printf(b, "\n\nError (%s):\n%s", cmd, error);
	const char *summary = out_head && *out_head   ? out_head
	                      : err_head && *err_head ? err_head
	                                              : "[no output]";
	return buf_printf(b, "\n\nOutput (%s):\n%s", cmd, summary);
}

char *agent_strip_tags(const char *s, size_t len)
{
	struct buf b;
	size_t pos = 0, from = 0;
	const char *cmd;
	size_t cl;
	buf_init(&b, 0);
	for (;;) {
		if (!agent_tag_next(s, len, &pos, &cmd, &cl))
			break;
		const char *open = cmd - 5; /* "<run>" */
		buf_append(&b, s + from, (size_t)(open - (s + from)));
		from = pos;
	}
	buf_append(&b, s + from, len - from);
	const char *t = b.data ? b.data : "";
	size_t tl = b.len;
	agent_trim(&t, &tl);
	char *out = strndup(t, tl);
	buf_free(&b);
	return out;
}

struct run_tags {
	struct manager *m;
	char *tenant, *id, *text;
	size_t len, pos;
	char *cmd; /* the one running */
	struct buf result;
	bool stepping, again;
	void (*done)(const char *reply, void *ctx);
	void *ctx;
};

static void tags_step(struct run_tags *t);

static void tag_done(const struct agent_cmd_result *res, void *ctx)
{
	struct run_tags *t = ctx;
	char *error = agent_cmd_error(res);
	if (agent_summary(&t->result, t->cmd, res->out.head, res->err.head,
	                  error) < 0)
		log_warn("event=agent-summary out of memory");
	free(error);
	free(t->cmd);
	t->cmd = NULL;
	if (t->stepping)
		t->again = true; /* tags_step goes on */
	else
		tags_step(t);
}

/* Start the next tag's command; the answer when none is left. */
static void tags_step(struct run_tags *t)
{
	t->stepping = true;
	for (;;) {
		const char *cmd;
		size_t cl;
		t->again = false;
		if (!agent_tag_next(t->text, t->len, &t->pos, &cmd, &cl))
			break;
		agent_trim(&cmd, &cl);
		if (!cl)
			continue; /* an empty tag is skipped */
		if (!(t->cmd = strndup(cmd, cl)))
			break;
		struct sbx_err err = {0};
		struct sandbox *sb;
		bool existed = manager_find(t->m, t->tenant, t->id) != NULL;
		int r = t->m->closing
		            ? sbx_err_set(&err, ECANCELED,
		                          "sandboxd is shutting down")
		            : manager_get(t->m, t->tenant, t->id, &sb, &err);
		if (r == 0) {
			sandbox_touch(sb);
			if ((r = manager_admit(sb, &err)) < 0 && !existed)
				sandbox_destroy(sb, NULL);
		}
		if (r == 0) {
			struct agent_cmd_opts o = {
			    .command = t->cmd,
			    .head_chars = AGENT_SUMMARY_CHARS,
			    .tail_chars = AGENT_SUMMARY_CHARS};
			r = agent_cmd_run(sb, &o, tag_done, t, NULL, &err);
			if (r == 0 && !t->again) {
				t->stepping = false;
				return; /* tag_done goes on */
			}
			if (r == 0)
				continue;
		}
		agent_summary(&t->result, t->cmd, NULL, NULL, err.msg);
		free(t->cmd);
		t->cmd = NULL;
	}
	t->stepping = false;
	char *reply = agent_strip_tags(t->result.data ? t->result.data : "",
	                               t->result.len);
	t->done(reply ? reply : "", t->ctx);
	free(reply);
	free(t->cmd);
	buf_free(&t->result);
	free(t->tenant);
	free(t->id);
	free(t->text);
	free(t);
}

int agent_run_tags(struct manager *m, const char *tenant, const char *id,
                   const char *text, void (*done)(const char *reply, void *ctx),
                   void *ctx, struct sbx_err *err)
{
	struct run_tags *t = calloc(1, sizeof(*t));
	if (!t)
		return sbx_err_set(err, ENOMEM, "out of memory");
	t->m = m;
	t->tenant = strdup(tenant);
	t->id = strdup(id);
	t->text = strdup(text);
	t->len = strlen(text);
	t->done = done;
	t->ctx = ctx;
	buf_init(&t->result, 0);
	if (!t->tenant || !t->id || !t->text ||
	    buf_append(&t->result, text, t->len) < 0) {
		free(t->tenant);
		free(t->id);
		free(t->text);
		buf_free(&t->result);
		free(t);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	tags_step(t);
	return 0;
}
