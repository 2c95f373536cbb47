/* What a session is made of: for the core's files only (scripts/check-layers
 * keeps the faces out). The faces see struct session as opaque and read it
 * through session_info (core/session.h). */
#ifndef SBX_SESSION_INTERNAL_H
#define SBX_SESSION_INTERNAL_H

#include "core/session.h"

struct session {
	char *id;
	char *cwd;
	char **env; /* "KEY=VALUE", NULL-terminated */
	size_t envc;
	uint64_t
	    timeout_ms; /* its commands' default timeout; 0: the daemon's */
	/* the strings of the last state record, in one piece (an entry of
	 * env points in here, or was allocated on its own) */
	char *block;
	size_t block_len;
	struct exec_job *running;
	struct exec_job *queue_head, *queue_tail;
	/* closing (sandbox_session_close): freed once its command ends */
	void (*on_closed)(void *ctx);
	void *closed_ctx;
	uint64_t saved; /* hash of the state last saved; 0: never saved */
	struct session *next;
};

#endif
