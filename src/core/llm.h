/* The room assistant's model: an OpenAI-compatible chat-completions
 * endpoint (llama.cpp's server, Ollama, vLLM, a hosted API) configured on
 * the daemon (--llm-url, --llm-model, --llm-key-file, --llm-timeout),
 * asked over HTTP by libcurl on the daemon's loop (core/curl_loop.h): no
 * thread, no blocking call, a bounded wait.
 *
 * The key lives only in this process's memory (wiped when freed): never in
 * a sandbox, a log line or an answer. */
#ifndef SBX_LLM_H
#define SBX_LLM_H

#include <stddef.h>

#include "core/config.h"
#include "lib/err.h"
#include "lib/loop.h"

struct llm;

struct llm_msg {
	const char *role; /* "system", "user", "assistant" */
	const char *content;
};

enum llm_status {
	LLM_OK,
	LLM_FAILED,  /* unreachable, an error status, an answer without text */
	LLM_TIMEOUT, /* no answer within --llm-timeout */
};

struct llm_answer {
	enum llm_status status;
	const char *text; /* LLM_OK: the model's message */
	const char *why;  /* otherwise: what went wrong, for a client */
};

/* From cfg (llm_url set): reads the key file. */
int llm_new(struct loop *l, const struct config *cfg, struct llm **out,
            struct sbx_err *err);
/* Requests still running end (done with LLM_FAILED) during the call. */
void llm_free(struct llm *c);

/* The endpoint's URL for chat completions, from --llm-url: a base such as
 * http://host:8081/v1 gets "/chat/completions"; a URL that ends with it
 * already is kept. Allocated. */
char *llm_completions_url(const char *base);
/* The text of the first choice of a chat-completions answer into *text
 * (allocated): 0, or -EBADMSG (not JSON, or no such text) or -ENOMEM with
 * err filled. */
int llm_parse_answer(const char *body, size_t len, char **text,
                     struct sbx_err *err);

/* Ask; done runs exactly once, never before this returns. */
int llm_chat(struct llm *c, const struct llm_msg *msgs, size_t n,
             void (*done)(const struct llm_answer *a, void *ctx), void *ctx,
             struct sbx_err *err);

#endif
