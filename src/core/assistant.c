/* The Duet room assistant (assistant.h).
 *
 * Theory of operation. A turn reads the room's last ASSISTANT_CONTEXT - 1
 * messages from the registry, adds the new one, and asks the model
 * (core/llm.c, on the loop). Its answer goes to agent_run_tags, which runs
 * the <run> tags one after the other in the room's sandbox; the final text
 * and the question are then written to the registry in one transaction,
 * and the last ASSISTANT_SHOWN messages are read back for the answer.
 * Nothing is written before the model has answered, so a failed turn
 * leaves no trace. Turns of one room may overlap (two users at once); each
 * is written whole when it ends. */
#include "core/assistant.h"

#include <stdlib.h>
#include <string.h>

#include "core/agent.h"
#include "core/llm.h"
#include "core/registry.h"
#include "lib/log.h"
#include "lib/util.h"

const char assistant_system_prompt[] =
    "You are the AI assistant of a Duet room, a shared workspace where "
    "several developers talk to you together. You can run shell commands "
    "in the room's Linux sandbox (Debian, bash, no Internet access; its "
    "files persist between commands and are shared by everyone in the "
    "room): write each command in your answer as <run>command</run>. "
    "After your answer every command runs, in order, and the first 500 "
    "characters of its output are shown to the room under your answer. "
    "Use commands only when they help; keep answers short.";

struct turn {
	struct manager *m;
	char *tenant, *room, *sandbox_id, *user_id, *text;
	uint64_t ts;
	void (*done)(const struct assistant_reply *r, void *ctx);
	void *ctx;
	/* history read from the registry */
	struct assistant_msg *msgs;
	size_t n, cap;
};

static void history_free(struct turn *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free((char *)t->msgs[i].role);
		free((char *)t->msgs[i].user_id);
		free((char *)t->msgs[i].text);
	}
	free(t->msgs);
	t->msgs = NULL;
	t->n = t->cap = 0;
}

static int history_add(const struct registry_message *rm, void *data)
{
	struct turn *t = data;
	if (t->n == t->cap) {
		size_t c = t->cap ? 2 * t->cap : 16;
		struct assistant_msg *p = realloc(t->msgs, c * sizeof(*p));
		if (!p)
			return -ENOMEM;
		t->msgs = p;
		t->cap = c;
	}
	struct assistant_msg *m = &t->msgs[t->n];
	m->role = strdup(rm->role);
	m->user_id = strdup(rm->user_id);
	m->text = strdup(rm->text);
	m->ts = rm->ts;
	t->n++;
	return m->role && m->user_id && m->text ? 0 : -ENOMEM;
}

static void turn_free(struct turn *t)
{
	history_free(t);
	free(t->tenant);
	free(t->room);
	free(t->sandbox_id);
	free(t->user_id);
	free(t->text);
	free(t);
}

static void fail(struct turn *t, enum assistant_status st, const char *why)
{
	struct assistant_reply r = {.status = st, .error = why};
	t->done(&r, t->ctx);
	turn_free(t);
}

static void on_reply(const char *reply, void *ctx)
{
	struct turn *t = ctx;
	struct sbx_err err = {0};
	const struct registry_message two[] = {
	    {.role = "user",
	     .user_id = t->user_id,
	     .text = t->text,
	     .ts = t->ts},
	    {.role = "agent",
	     .user_id = "agent",
	     .text = reply,
	     .ts = now_wall_ms()},
	};
	history_free(t);
	if (registry_messages_add(t->m->reg, t->tenant, t->room, two, 2, &err) <
	        0 ||
	    registry_messages_load(t->m->reg, t->tenant, t->room,
	                           ASSISTANT_SHOWN, history_add, t, &err) < 0) {
		log_error("room=%s event=assistant-history %s", t->room,
		          err.msg);
		fail(t, ASSISTANT_INTERNAL,
		     err.msg[0] ? err.msg : "out of memory");
		return;
	}
	struct assistant_reply r = {.status = ASSISTANT_OK,
	                            .reply = reply,
	                            .msgs = t->msgs,
	                            .nmsgs = t->n};
	t->done(&r, t->ctx);
	turn_free(t);
}

static void on_answer(const struct llm_answer *a, void *ctx)
{
	struct turn *t = ctx;
	struct sbx_err err = {0};
	if (a->status != LLM_OK) {
		log_warn("room=%s event=assistant-failed %s", t->room, a->why);
		fail(t,
		     a->status == LLM_TIMEOUT ? ASSISTANT_TIMEOUT
		                              : ASSISTANT_FAILED,
		     a->why);
		return;
	}
	if (agent_run_tags(t->m, t->tenant, t->sandbox_id, a->text, on_reply, t,
	                   &err) < 0)
		fail(t, ASSISTANT_INTERNAL, err.msg);
}

void assistant_message(struct manager *m, const char *tenant, const char *room,
                       const char *sandbox_id, const char *user_id,
                       const char *text,
                       void (*done)(const struct assistant_reply *r, void *ctx),
                       void *ctx)
{
	struct sbx_err err = {0};
	if (!m->llm) {
		struct assistant_reply r = {
		    .status = ASSISTANT_NO_MODEL,
		    .error = "no assistant model is configured on this "
		             "daemon (start it with --llm-url)"};
		done(&r, ctx);
		return;
	}
	struct turn *t = calloc(1, sizeof(*t));
	if (!t) {
		struct assistant_reply r = {.status = ASSISTANT_INTERNAL,
		                            .error = "out of memory"};
		done(&r, ctx);
		return;
	}
	t->m = m;
	t->done = done;
	t->ctx = ctx;
	t->ts = now_wall_ms();
	t->tenant = strdup(tenant);
	t->room = strdup(room);
	t->sandbox_id = strdup(sandbox_id);
	t->user_id = strdup(user_id);
	t->text = strdup(text);
	if (!t->tenant || !t->room || !t->sandbox_id || !t->user_id ||
	    !t->text) {
		fail(t, ASSISTANT_INTERNAL, "out of memory");
		return;
	}
	if (registry_messages_load(m->reg, tenant, room, ASSISTANT_CONTEXT - 1,
	                           history_add, t, &err) < 0) {
		fail(t, ASSISTANT_INTERNAL,
		     err.msg[0] ? err.msg : "out of memory");
		return;
	}
	size_t n = t->n + 2;
	struct llm_msg *msgs = calloc(n, sizeof(*msgs));
	if (!msgs) {
		fail(t, ASSISTANT_INTERNAL, "out of memory");
		return;
	}
	msgs[0] = (struct llm_msg){"system", assistant_system_prompt};
	for (size_t i = 0; i < t->n; i++)
		msgs[i + 1] = (struct llm_msg){
		    strcmp(t->msgs[i].role, "agent") ? "user" : "assistant",
		    t->msgs[i].text};
	msgs[n - 1] = (struct llm_msg){"user", t->text};
	int rc = llm_chat(m->llm, msgs, n, on_answer, t, &err);
	free(msgs);
	if (rc < 0)
		fail(t, ASSISTANT_INTERNAL, err.msg);
}

int assistant_forget(struct manager *m, const char *tenant, const char *room,
                     struct sbx_err *err)
{
	return registry_messages_clear(m->reg, tenant, room, err);
}
