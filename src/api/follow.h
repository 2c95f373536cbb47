/* A process's output followed onto a relay: the part every face shares
 * (resume the follower when the client caught up; when the client leaves,
 * stop following and let go), so that a face writes only its encoding of
 * the events. A face embeds struct api_follow as the FIRST member of its
 * own heap-allocated context, which api_follow_end frees. */
#ifndef SBX_API_FOLLOW_H
#define SBX_API_FOLLOW_H

#include "core/process.h"
#include "http/relay.h"

struct api_follow {
	struct relay *rl;
	struct process_follower *f;
};

/* Answer r with the stream (relay opts as relay_open); -1 when it could
 * not be started (ctx is then freed). The face may write events before
 * api_follow_attach. */
int api_follow_open(struct api_follow *fw, struct http_req *r,
		    struct loop *loop, const struct relay_opts *opts);
/* Follow p from cursor with the face's callbacks (ctx = fw). */
void api_follow_attach(struct api_follow *fw, struct process *p,
		       uint64_t cursor, const struct process_follow_ops *ops);
/* From the face's ended callback: end the stream, free the context. */
void api_follow_end(struct api_follow *fw);

#endif
