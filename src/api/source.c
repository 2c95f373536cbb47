#include "api/source.h"

#include <stdlib.h>

static void follow_resume(void *ctx)
{
	struct api_follow *fw = ctx;
	process_follow_resume(fw->f);
}

static void follow_abandoned(void *ctx)
{
	struct api_follow *fw = ctx;
	process_unfollow(fw->f);
	api_follow_end(fw);
}

static const struct relay_ops follow_relay = {follow_resume, follow_abandoned};

int api_follow_open(struct api_follow *fw, struct http_req *r,
                    struct loop *loop, const struct relay_opts *opts)
{
	fw->rl = relay_open(r, loop, opts, &follow_relay, fw);
	if (!fw->rl) {
		free(fw);
		return -1;
	}
	return 0;
}

void api_follow_attach(struct api_follow *fw, struct process *p,
                       uint64_t cursor, const struct process_follow_ops *ops)
{
	if (process_follow(p, cursor, ops, fw, &fw->f) < 0)
		api_follow_end(fw);
}

void api_follow_end(struct api_follow *fw)
{
	relay_end(fw->rl);
	free(fw);
}

static void cell_resume(void *ctx)
{
	struct api_cell *c = ctx;
	interp_cell_resume(c->cell);
}

/* nobody to tell: no event comes after the cancel */
static void cell_abandoned(void *ctx)
{
	struct api_cell *c = ctx;
	interp_cell_cancel(c->cell);
	relay_end(c->rl);
	free(c);
}

const struct relay_ops api_cell_relay = {cell_resume, cell_abandoned};

static void exec_resume(void *ctx)
{
	struct api_exec *x = ctx;
	if (x->job)
		exec_resume_output(x->job);
}

static void exec_abandoned(void *ctx)
{
	struct api_exec *x = ctx;
	if (x->job)
		exec_cancel(x->job);
}

const struct relay_ops api_exec_relay = {exec_resume, exec_abandoned};

static void fileop_resumed(void *ctx)
{
	struct api_fileop *x = ctx;
	if (x->op)
		fileop_resume(x->op);
}

static void fileop_abandoned(void *ctx)
{
	struct api_fileop *x = ctx;
	if (x->op)
		fileop_cancel(x->op);
}

const struct relay_ops api_fileop_relay = {fileop_resumed, fileop_abandoned};

static void watch_resumed(void *ctx)
{
	struct api_watch *x = ctx;
	if (x->w)
		watch_resume(x->w);
}

/* nobody to tell: no callback comes after the stop */
static void watch_abandoned(void *ctx)
{
	struct api_watch *x = ctx;
	if (x->w)
		watch_stop(x->w);
	relay_end(x->rl);
	free(x);
}

const struct relay_ops api_watch_relay = {watch_resumed, watch_abandoned};
