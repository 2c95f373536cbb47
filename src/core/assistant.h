/* The Duet room assistant (shared/spec/agents.md, seeds 000-002): a
 * message to a room goes to the model with the room's recent history; the
 * <run> tags of its answer run in the room's sandbox (core/agent.h) and
 * their summaries are appended; the question and the answer join the
 * history, which lives in the registry and survives restarts.
 *
 * The model sees a system prompt and the last ASSISTANT_CONTEXT messages
 * of the room, the new one included (agents' messages as "assistant");
 * ASSISTANT_SHOWN come back. A failed turn (the model unreachable, slow, or
 * answering nonsense) leaves the history as it was. */
#ifndef SBX_ASSISTANT_H
#define SBX_ASSISTANT_H

#include <stddef.h>
#include <stdint.h>

#include "core/manager.h"

#define ASSISTANT_CONTEXT 10
#define ASSISTANT_SHOWN 50

struct assistant_msg {
	const char *role; /* "user" or "agent" */
	const char *user_id;
	const char *text;
	uint64_t ts; /* wall clock, ms */
};

enum assistant_status {
	ASSISTANT_OK,
	ASSISTANT_NO_MODEL, /* no --llm-url */
	ASSISTANT_FAILED,   /* the model failed: unreachable, bad answer */
	ASSISTANT_TIMEOUT,  /* the model did not answer in time */
	ASSISTANT_INTERNAL, /* the registry failed */
};

struct assistant_reply {
	enum assistant_status status;
	const char *error;                /* unless ASSISTANT_OK */
	const char *reply;                /* ASSISTANT_OK */
	const struct assistant_msg *msgs; /* the last ASSISTANT_SHOWN */
	size_t nmsgs;
};

/* The system prompt the model gets first. */
extern const char assistant_system_prompt[];

/* One turn of room (whose sandbox is sandbox_id) for a user; done runs
 * exactly once, possibly before this returns. */
void assistant_message(struct manager *m, const char *tenant, const char *room,
                       const char *sandbox_id, const char *user_id,
                       const char *text,
                       void (*done)(const struct assistant_reply *r, void *ctx),
                       void *ctx);
/* Clear the room's history. */
int assistant_forget(struct manager *m, const char *tenant, const char *room,
                     struct sbx_err *err);

#endif
