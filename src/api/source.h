/* A core source streamed onto a relay: the part every face shares, so
 * that a face writes only its encoding of the events.
 *
 * - api_follow: a process's output (resume the follower when the client
 *   caught up; when the client leaves, stop following and let go);
 * - api_cell: an interpreter cell (resume it; when the client leaves,
 *   cancel it and let go);
 * - api_exec: a streamed command (resume reading its output; when the
 *   client leaves, kill it: a streamed command lives for its reader, and
 *   its exec_done callback then ends the relay);
 * - api_fileop: a file operation's output (resume the builtin; when the
 *   client leaves, cancel it; its on_done then ends the relay);
 * - api_watch: a directory watch (resume it; when the client leaves, stop
 *   it and let go).
 *
 * A face embeds the struct as the FIRST member of its own heap-allocated
 * context, which is freed when the client leaves or by api_*_end. */
#ifndef SBX_API_SOURCE_H
#define SBX_API_SOURCE_H

#include "core/exec.h"
#include "core/fileop.h"
#include "core/interp.h"
#include "core/process.h"
#include "core/watch.h"
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

struct api_cell {
	struct relay *rl;
	struct interp_cell *cell; /* NULL once it ended */
};
/* Open the relay with these ops (ctx = the face's context); after the
 * cell's END the face calls relay_end and frees its context itself. */
extern const struct relay_ops api_cell_relay;

struct api_exec {
	struct relay *rl;     /* NULL: not streamed */
	struct exec_job *job; /* NULL once done */
};
extern const struct relay_ops api_exec_relay;

struct api_fileop {
	struct relay *rl;  /* NULL until the answer starts */
	struct fileop *op; /* NULL once done */
};
extern const struct relay_ops api_fileop_relay;

struct api_watch {
	struct relay *rl; /* NULL until the face opens it */
	struct watch *w;  /* NULL once it ended */
};
/* Open the relay with these ops (ctx = the face's context); after the
 * watch's ended callback the face calls relay_end and frees its context
 * itself. */
extern const struct relay_ops api_watch_relay;

#endif
