/* Sandbox lifecycle on the daemon's side of the socket. The start sequence
 * is DESIGN.md's: a user namespace with the sandbox's uid range (kept alive
 * by an fd), then init in new mount, pid, ipc, uts and net namespaces that
 * stay owned by the host's user namespace, so the sandbox can never
 * reconfigure them. init is a fork of the zygote (zygote.h), the init
 * binary exec'd once from a sealed memfd when the runtime is made; the
 * daemon sends init its parameters as the first packet. */
#include "runtime/runtime.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "lib/log.h"
#include "runtime/fsutil.h"
#include "runtime/image.h"
#include "runtime/proto.h"
#include "runtime/rootfs.h"
#include "runtime/userns.h"
#include "runtime/usrmask.h"

static char *join(const char *a, const char *b)
{
	char *s;
	if (asprintf(&s, "%s/%s", a, b) < 0)
		return NULL;
	return s;
}

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

int runtime_new(const char *state_dir, uint64_t store_bytes,
                const struct image_file *files, size_t nfiles,
                struct runtime **out, struct sbx_err *err)
{
	struct runtime *rt = calloc(1, sizeof(*rt));
	_cleanup_close_ int sd = -1;
	int r;
	if (!rt)
		return sbx_err_set(err, ENOMEM, "out of memory");
	rt->ahead.sock = -1;
	/* first, while the daemon has few fds: these stay low numbers */
	if ((r = zygote_prepare(&rt->zygote, err)))
		goto fail;
	rt->state_dir = realpath(state_dir, NULL);
	if (!rt->state_dir) {
		r = sbx_err_sys(err, errno, "state dir %s", state_dir);
		goto fail;
	}
	/* Its path goes into overlay mount options, where ',' ':' and '\'
	 * are syntax. */
	if (strpbrk(rt->state_dir, ",:\\ \n")) {
		r = sbx_err_set(
		    err, EINVAL,
		    "state dir %s: must not contain , : \\ or spaces",
		    rt->state_dir);
		goto fail;
	}
	rt->image_dir = join(rt->state_dir, "image/default");
	rt->mnt_dir = join(rt->state_dir, "run/mnt");
	rt->sandboxes_dir = join(rt->state_dir, "sandboxes");
	rt->trash_dir = join(rt->state_dir, "trash");
	rt->usr_mask_dir = join(rt->state_dir, "image/usrmask");
	rt->image_top_dir = join(rt->state_dir, "image/top");
	rt->layers_dir = join(rt->state_dir, "images/layers");
	rt->max_ptys = RUNTIME_MAX_PTYS;
	if (!rt->image_dir || !rt->mnt_dir || !rt->sandboxes_dir ||
	    !rt->trash_dir || !rt->usr_mask_dir || !rt->image_top_dir ||
	    !rt->layers_dir) {
		r = sbx_err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	sd = open(rt->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sd < 0) {
		r = sbx_err_sys(err, errno, "open %s", rt->state_dir);
		goto fail;
	}
	/* the state dir holds every sandbox's files: nobody else's business */
	if (fchmod(sd, 0711) < 0) {
		r = sbx_err_sys(err, errno, "chmod %s", rt->state_dir);
		goto fail;
	}
	if ((r = fs_mkdirs(sd, "image", 0700, err)) ||
	    (r = fs_mkdirs(sd, "run/mnt/root", 0700, err)) ||
	    (r = fs_mkdirs(sd, "run/mnt/lusr", 0700, err)) ||
	    (r = fs_mkdirs(sd, "run/mnt/lskel", 0700, err)) ||
	    (r = fs_mkdirs(sd, "run/mnt/lmask", 0700, err)) ||
	    (r = fs_mkdirs(sd, "run/mnt/sb", 0700, err)) ||
	    (r = fs_mkdirs(sd, "run/mnt/limg", 0700, err)) ||
	    (r = fs_mkdirs(sd, "run/mnt/ltop", 0700, err)) ||
	    (r = fs_mkdirs(sd, "images/layers", 0700, err)) ||
	    (r = fs_mkdirs(sd, "sandboxes", 0700, err)) ||
	    (r = fs_mkdirs(sd, "trash", 0700, err)))
		goto fail;
	if ((r = image_prepare(rt->image_dir, files, nfiles, err)) ||
	    (r = image_prepare_top(rt->image_top_dir, files, nfiles, err)))
		goto fail;
	/* the /usr mask is built while the daemon starts; the first sandbox
	 * start waits for it (usr_mask_ready) */
	if ((r = usrmask_build_start("/usr", rt->usr_mask_dir,
	                             &rt->usr_mask_job, err)))
		goto fail;
	if ((r = store_open(rt->state_dir, store_bytes, &rt->store, err)))
		goto fail;
	if ((r = seccomp_prog_build(&rt->seccomp, err)))
		goto fail;
	/* One cgroup subtree per state dir: two daemons (a test beside `make
	 * run`) never touch each other's sandboxes. */
	char cgname[64];
	snprintf(cgname, sizeof(cgname), "sandboxd-%08x", fnv1a(rt->state_dir));
	if ((r = cgroup_manager_new(NULL, cgname, &rt->cg, err)))
		goto fail;
	/* a daemon killed mid-snapshot left its sandbox frozen */
	cgroup_manager_thaw(rt->cg);
	if ((r = cgroup_manager_clean(rt->cg, err)))
		goto fail;
	/* and the subtrees of earlier state dirs whose daemons died */
	struct sbx_err serr = {0};
	if (cgroup_manager_remove_stale(rt->cg, "sandboxd-", &serr) < 0)
		fprintf(stderr, "%s\n", serr.msg);
	/* whatever a previous daemon left in the trash */
	runtime_remove_files(rt, NULL, NULL);
	/* the daemon's cgroup is settled (cgroup_manager_new) */
	if ((r = zygote_launch(&rt->zygote, err)))
		goto fail;
	*out = rt;
	return 0;
fail:
	runtime_free(rt);
	return r;
}

int runtime_set_totals(struct runtime *rt, uint64_t memory_bytes, uint64_t pids,
                       struct sbx_err *err)
{
	return cgroup_manager_set_totals(rt->cg, memory_bytes, pids, err);
}

/* The zygote's answer to make_ahead_init's request, which the daemon did
 * not wait for: it is there by the next start (the zygote clones while
 * the daemon goes on), and it is taken before the zygote is asked again. */
static void ahead_settle(struct runtime *rt)
{
	if (!rt->ahead.asked)
		return;
	rt->ahead.asked = false;
	struct sbx_err err = {0};
	pid_t pid = zygote_answer(&rt->zygote, &err);
	if (pid > 0) {
		rt->ahead.pid = pid;
		return;
	}
	log_warn("event=init-ahead-failed %s", err.msg);
	close(rt->ahead.sock);
	rt->ahead.sock = -1;
}

/* The init made ahead, killed and reaped (it is in the set made ahead, which
 * can only be removed empty). */
static void drop_ahead(struct runtime *rt)
{
	ahead_settle(rt);
	if (rt->ahead.pid > 0) {
		kill(rt->ahead.pid, SIGKILL);
		while (waitpid(rt->ahead.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (rt->ahead.sock >= 0)
		close(rt->ahead.sock);
	rt->ahead.pid = 0;
	rt->ahead.sock = -1;
}

/* The same on a start's way: killed now and reaped by runtime_collect,
 * as the cleaners are (its exit, a copy of the host's mount namespace
 * going away, is ~2 ms here); waited for only when that list is full. It
 * may still be dying in the set the start takes: it holds nothing there. */
static void drop_ahead_later(struct runtime *rt)
{
	ahead_settle(rt);
	size_t max = sizeof(rt->cleaners) / sizeof(rt->cleaners[0]);
	if (rt->ahead.pid > 0 && rt->ncleaners < max) {
		kill(rt->ahead.pid, SIGKILL);
		rt->cleaners[rt->ncleaners].pid = rt->ahead.pid;
		rt->cleaners[rt->ncleaners].name[0] = '\0';
		rt->ncleaners++;
		rt->ahead.pid = 0;
	}
	drop_ahead(rt);
}

void runtime_free(struct runtime *rt)
{
	if (!rt)
		return;
	usrmask_job_free(rt->usr_mask_job);
	drop_ahead(rt);
	if (rt->cg) {
		/* every sandbox is stopped by now: leave no empty cgroups */
		cgroup_manager_remove(rt->cg, NULL);
		cgroup_manager_free(rt->cg);
	}
	store_close(rt->store);
	seccomp_prog_free(&rt->seccomp);
	zygote_close(&rt->zygote);
	free(rt->state_dir);
	free(rt->image_dir);
	free(rt->mnt_dir);
	free(rt->sandboxes_dir);
	free(rt->trash_dir);
	free(rt->usr_mask_dir);
	free(rt->image_top_dir);
	free(rt->layers_dir);
	free(rt);
}

/* The /usr mask, once built: its layer, or none when nothing is masked.
 * A mask that could not be built fails every start (never a sandbox
 * without it). */
static int usr_mask_ready(struct runtime *rt, struct sbx_err *err)
{
	size_t masked;
	if (rt->usr_mask_done)
		return 0;
	int r = usrmask_build_wait(rt->usr_mask_job, &masked, err);
	if (r < 0)
		return r;
	rt->usr_mask_done = true;
	if (masked)
		log_info("event=usr-masked entries=%zu (not readable by others "
		         "on the host, hidden in sandboxes)",
		         masked);
	else {
		free(rt->usr_mask_dir);
		rt->usr_mask_dir = NULL;
	}
	return 0;
}

void runtime_expect_base(struct runtime *rt, uid_t base)
{
	rt->next_base = base;
}

/* init's socket: the daemon's end in sv[0]. Sized for the largest
 * message either way (PROTO_SOCKBUF). */
static int init_socketpair(int sv[2], struct sbx_err *err)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_err_sys(err, errno, "socketpair");
	for (int i = 0; i < 2; i++) {
		int sz = PROTO_SOCKBUF;
		setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz));
		setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	}
	return 0;
}

/* The next start's init, in the set made ahead: the zygote's clone, the
 * joining of six cgroups and init's first steps leave the start. Asked for,
 * not waited for (ahead_settle): the started sandbox's init needs the
 * daemon when it is ready. */
static void make_ahead_init(struct runtime *rt)
{
	struct sbx_err err = {0};
	int fds[CGROUP_MAX_HIER], nfds, sv[2];
	if (rt->ahead.pid > 0 || rt->ahead.asked || !rt->next_base ||
	    cgroup_manager_ahead_init_fds(rt->cg, fds, &nfds, &err) < 0)
		return; /* v2: no set ahead */
	int r = init_socketpair(sv, &err);
	if (r == 0) {
		r = zygote_ask(&rt->zygote, sv[1], rt->next_base, 0, fds, nfds,
		               &err);
		close(sv[1]);
		if (r < 0)
			close(sv[0]);
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (r < 0) {
		log_warn("event=init-ahead-failed %s", err.msg);
		return;
	}
	rt->ahead.asked = true;
	rt->ahead.sock = sv[0];
	rt->ahead.base = rt->next_base;
}

void runtime_make_ahead(struct runtime *rt)
{
	struct sbx_err err = {0};
	if (cgroup_manager_make_ahead(rt->cg, &rt->last_lim, &err) < 0)
		log_warn("event=cgroups-ahead-failed %s", err.msg);
	else
		make_ahead_init(rt);
}

int runtime_start(struct runtime *rt, const char *name, uid_t base,
                  const struct cgroup_limits *lim,
                  const struct runtime_files *files, struct sandbox_proc *out,
                  struct sbx_err *err)
{
	_cleanup_free_ char *dir = join(rt->sandboxes_dir, name);
	uint64_t disk_bytes = files->disk_bytes;
	int r;

	memset(out, 0, sizeof(*out));
	out->sock = out->pidfd = -1;
	if (!dir)
		return sbx_err_set(err, ENOMEM, "out of memory");
	if ((r = usr_mask_ready(rt, err)))
		return r;
	uid_t owner;
	if ((r = runtime_files_prepare(rt, name, base, files, &owner, err)))
		return r;
	if ((r = rootfs_prepare_dir(dir, owner, err)))
		return r;
	_cleanup_close_ int files_userns = -1;
	if (owner != base &&
	    (files_userns = userns_create_idmap(base, owner, err)) < 0)
		return files_userns;
	/* the init made ahead is in the namespaces of its base only */
	ahead_settle(rt);
	if (rt->ahead.pid > 0 && rt->ahead.base != base)
		drop_ahead_later(rt);
	r = cgroup_sandbox_new(rt->cg, name, lim, &out->cg, err);
	if (rt->ahead.pid > 0 && (r < 0 || !cgroup_sandbox_was_ahead(out->cg)))
		drop_ahead(rt); /* killed with the set that was not taken */
	if (r < 0)
		return r;

	/* init's parameters wait in its socket before it runs: it never
	 * waits for the daemon to be scheduled again. The user namespace that
	 * idmaps the sandbox's own files (a fork's) comes with them. */
	struct init_params ip = {.base = base,
	                         .max_ptys = rt->max_ptys,
	                         .disk_bytes = disk_bytes,
	                         .image_dir = rt->image_dir,
	                         .usr_mask = rt->usr_mask_dir,
	                         .mnt_dir = rt->mnt_dir,
	                         .sandbox_dir = dir,
	                         .layers_dir = rt->layers_dir,
	                         .image_top = rt->image_top_dir,
	                         .layers = files->layers,
	                         .nlayers = (uint32_t)files->nlayers,
	                         .seccomp = rt->seccomp};
	static char buf[PROTO_MAX_PAYLOAD];
	ssize_t len = proto_init_encode(&ip, buf, sizeof(buf));
	if (len < 0) {
		drop_ahead(rt); /* before its cgroups go */
		cgroup_sandbox_destroy(out->cg, NULL);
		out->cg = NULL;
		return sbx_err_set(err, E2BIG, "init parameters too long");
	}
	/* The init made ahead takes them (it waits in the cgroups that are
	 * the sandbox's now); one found gone is reaped, and one is made. */
	if (rt->ahead.pid > 0) {
		if (proto_send(rt->ahead.sock, PROTO_INIT, 0, buf, (size_t)len,
		               &files_userns, files_userns >= 0 ? 1 : 0) == 0) {
			out->init_pid = rt->ahead.pid;
			out->sock = rt->ahead.sock;
			rt->ahead.pid = 0;
			rt->ahead.sock = -1;
			rt->last_lim = *lim;
			return 0;
		}
		drop_ahead(rt);
	}

	int sv[2];
	if ((r = init_socketpair(sv, err)) < 0) {
		cgroup_sandbox_destroy(out->cg, NULL);
		out->cg = NULL;
		return r;
	}
	if ((r = proto_send(sv[0], PROTO_INIT, 0, buf, (size_t)len,
	                    &files_userns, files_userns >= 0 ? 1 : 0)) < 0)
		r = sbx_err_sys(err, -r, "sending init its parameters");
	int cg_fds[CGROUP_MAX_HIER], ncg = 0;
	if (r == 0)
		r = cgroup_sandbox_init_fds(out->cg, cg_fds, &ncg, err);
	/* No pidfd: a running sandbox costs the daemon one fd, its socket,
	 * whose end of file says init is gone (10,000 sandboxes fit in 20,000
	 * fds); init is our child, reaped only by runtime_reap, so its pid
	 * names it until then. */
	pid_t pid = r < 0 ? r
	                  : zygote_make_init(&rt->zygote, sv[1], base,
	                                     rt->next_base, cg_fds, ncg, err);
	for (int i = 0; i < ncg; i++)
		close(cg_fds[i]);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		cgroup_sandbox_destroy(out->cg, NULL);
		out->cg = NULL;
		return pid;
	}
	out->init_pid = pid;
	out->sock = sv[0];
	rt->last_lim = *lim;
	return 0;
}

int runtime_files_prepare(struct runtime *rt, const char *name, uid_t base,
                          const struct runtime_files *files, uid_t *owner,
                          struct sbx_err *err)
{
	char txt[32];
	int r;
	if ((r = store_create(rt->store, name, files->disk_bytes, files->group,
	                      err)))
		return r;
	_cleanup_close_ int dfd =
	    open(rt->sandboxes_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int sfd =
	    dfd < 0 ? -1
	            : openat(dfd, name,
	                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return sbx_err_sys(err, errno, "open %s/%s", rt->sandboxes_dir,
		                   name);
	ssize_t n = fs_read_small(sfd, "owner", txt, sizeof(txt));
	if (n == -ENOENT) {
		if (files->image &&
		    (r = fs_write_str(sfd, "image", files->image, 0600, err)))
			return r;
		snprintf(txt, sizeof(txt), "%u\n", (unsigned)base);
		*owner = base;
		return fs_write_str(sfd, "owner", txt, 0600, err);
	}
	char *end;
	unsigned long v = n > 0 ? strtoul(txt, &end, 10) : 0;
	if (n <= 0 || end == txt || (*end && *end != '\n') ||
	    v < USERNS_RANGE || v > 0xffff0000ul - USERNS_RANGE)
		return sbx_err_set(err, EINVAL,
		                   "%s/%s/owner: not the base of a uid range",
		                   rt->sandboxes_dir, name);
	*owner = (uid_t)v;
	return 0;
}

int runtime_files_image(struct runtime *rt, const char *name, char *buf,
                        size_t cap)
{
	_cleanup_close_ int dfd =
	    open(rt->sandboxes_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int sfd =
	    dfd < 0 ? -1
	            : openat(dfd, name,
	                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	buf[0] = '\0';
	ssize_t n = sfd < 0 ? -ENOENT : fs_read_small(sfd, "image", buf, cap);
	if (n < 0) {
		buf[0] = '\0';
		return n == -ENOENT ? 0 : (int)n;
	}
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

int runtime_spawn(struct sandbox_proc *sp, uint64_t id, struct spawn_req *req,
                  const int *stdio_fds, int *cg_idx, struct sbx_err *err)
{
	int fds[PROTO_MAX_FDS], ncg = 0;
	static char buf[PROTO_MAX_PAYLOAD];

	if (req->nstdio > 4)
		return sbx_err_set(err, EINVAL, "spawn: too many stdio fds");
	int idx = cgroup_cmd_acquire(sp->cg, NULL, &ncg, err);
	if (idx < 0)
		return idx;
	if (idx >= PROTO_MAX_LEAVES) {
		cgroup_cmd_release(sp->cg, idx);
		return sbx_err_set(err, EAGAIN, "spawn: too many commands");
	}
	/* The spawner keeps a leaf's fds: open and send them once, not per
	 * command (an open in each of 3-4 hierarchies, and the fd passing). */
	if ((size_t)idx >= sp->nleaf_given) {
		size_t n = (size_t)idx + 16;
		uint8_t *g = realloc(sp->leaf_given, n);
		if (!g) {
			cgroup_cmd_release(sp->cg, idx);
			return sbx_err_set(err, ENOMEM, "out of memory");
		}
		memset(g + sp->nleaf_given, 0, n - sp->nleaf_given);
		sp->leaf_given = g;
		sp->nleaf_given = n;
	}
	if (!sp->leaf_given[idx]) {
		int r =
		    cgroup_cmd_open(sp->cg, idx, fds + req->nstdio, &ncg, err);
		if (r < 0) {
			cgroup_cmd_release(sp->cg, idx);
			return r;
		}
		if (ncg > PROTO_MAX_LEAF_FDS) {
			for (int i = 0; i < ncg; i++)
				close(fds[req->nstdio + i]);
			cgroup_cmd_release(sp->cg, idx);
			return sbx_err_set(err, E2BIG,
			                   "spawn: too many cgroup "
			                   "hierarchies");
		}
	}
	memcpy(fds, stdio_fds, req->nstdio * sizeof(int));
	req->leaf = idx;
	req->ncg = (uint32_t)ncg;
	ssize_t len = proto_spawn_encode(req, buf, sizeof(buf));
	int r = len < 0
	            ? sbx_err_set(err, E2BIG,
	                          "command, arguments and environment "
	                          "exceed %u bytes",
	                          PROTO_MAX_PAYLOAD)
	            : proto_send(sp->sock, PROTO_SPAWN, id, buf, (size_t)len,
	                         fds, req->nstdio + (size_t)ncg);
	for (int i = 0; i < ncg; i++)
		close(fds[req->nstdio + i]);
	if (r == 0 && ncg)
		sp->leaf_given[idx] = 1;
	if (r < 0) {
		cgroup_cmd_release(sp->cg, idx);
		if (len >= 0)
			return sbx_err_set(err, -r,
			                   "sending to sandbox init: %s",
			                   strerror(-r));
		return r;
	}
	*cg_idx = idx;
	return 0;
}

void runtime_kill(struct sandbox_proc *sp)
{
	/* a pidfd for its end, while it goes (the socket's end of file
	 * comes early in init's exit, before its namespace is gone) */
	if (sp->pidfd < 0 && sp->init_pid > 0)
		sp->pidfd = (int)syscall(SYS_pidfd_open, sp->init_pid, 0);
	if (sp->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, sp->pidfd, SIGKILL, NULL, 0);
	else if (sp->init_pid > 0) /* not reaped yet: still ours */
		kill(sp->init_pid, SIGKILL);
}

/* init is reaped: remove its cgroups, close the handles */
static void reaped(struct sandbox_proc *sp)
{
	sp->init_pid = 0;
	/* init's death killed its pid namespace, and init became reapable
	 * only once that was done: the cgroups are empty, they only need
	 * removing */
	if (sp->cg) {
		struct sbx_err err;
		if (cgroup_sandbox_remove(sp->cg, &err) < 0)
			fprintf(stderr, "cgroup cleanup: %s\n", err.msg);
		sp->cg = NULL;
	}
	if (sp->sock >= 0)
		close(sp->sock);
	if (sp->pidfd >= 0)
		close(sp->pidfd);
	sp->sock = sp->pidfd = -1;
	free(sp->leaf_given);
	sp->leaf_given = NULL;
	sp->nleaf_given = 0;
}

void runtime_reap(struct sandbox_proc *sp)
{
	if (sp->init_pid > 0) {
		int st;
		while (waitpid(sp->init_pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	reaped(sp);
}

void runtime_wait_exit(struct sandbox_proc *sp)
{
	siginfo_t si;
	if (sp->init_pid > 0)
		while (waitid(P_PID, (id_t)sp->init_pid, &si,
		              WEXITED | WNOWAIT) < 0 &&
		       errno == EINTR)
			;
}

int runtime_reap_nowait(struct sandbox_proc *sp)
{
	if (sp->init_pid > 0) {
		int st;
		pid_t r;
		while ((r = waitpid(sp->init_pid, &st, WNOHANG)) < 0 &&
		       errno == EINTR)
			;
		if (r == 0)
			return 0; /* its namespace is still going down */
	}
	reaped(sp);
	return 1;
}

static bool cleaning(struct runtime *rt, const char *name)
{
	for (size_t i = 0; i < rt->ncleaners; i++)
		if (!strcmp(rt->cleaners[i].name, name))
			return true;
	return false;
}

/* Deleting a big tree takes long; a child does it while the daemon goes
 * on: <dir>/<name>, or everything in dir when name is NULL. It keeps no
 * fd of the daemon's (a listening socket held by it would outlive the
 * daemon). Links inside are never followed, mounts never entered, and
 * depth costs it no fds (fsutil.c). */
static void start_cleaner(struct runtime *rt, const char *dir, const char *name)
{
	size_t max = sizeof(rt->cleaners) / sizeof(rt->cleaners[0]);
	if (rt->ncleaners == max)
		return; /* enough at work; a later call does the rest */
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		if (dup2(fd, 3) == 3) {
			syscall(SYS_close_range, 4, ~0U, 0);
			if (name)
				fs_remove_tree(3, name, NULL);
			else
				fs_empty_dir(3, NULL);
		}
		_exit(0);
	}
	close(fd);
	if (pid > 0) {
		rt->cleaners[rt->ncleaners].pid = pid;
		snprintf(rt->cleaners[rt->ncleaners].name,
		         sizeof(rt->cleaners[0].name), "%s", name ? name : "");
		rt->ncleaners++;
	}
}

bool runtime_files_exist(struct runtime *rt, const char *name)
{
	_cleanup_free_ char *path = join(rt->sandboxes_dir, name);
	struct stat st;
	return !path || lstat(path, &st) == 0 || errno != ENOENT;
}

int runtime_remove_files(struct runtime *rt, const char *name,
                         struct sbx_err *err)
{
	int r;
	if (name && *name && cleaning(rt, name))
		return sbx_err_set(err, EBUSY,
		                   "%s: its files are being removed", name);
	if (name && rt->store->quotas) { /* a subvolume: gone at once */
		if ((r = store_remove(rt->store, name, err)) == 0)
			return 0;
		/* not a subvolume (made before the store existed), or one
		 * that cannot go (immutable, busy): walk it in the
		 * background; the name stays taken until it is gone */
		start_cleaner(rt, rt->sandboxes_dir, name);
		return r;
	}
	if (name) {
		_cleanup_free_ char *src = join(rt->sandboxes_dir, name);
		char dst[4096];
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(dst, sizeof(dst), "%s/%s.%lld.%09ld", rt->trash_dir,
		         name, (long long)ts.tv_sec, ts.tv_nsec);
		if (!src)
			return sbx_err_set(err, ENOMEM, "out of memory");
		if (rename(src, dst) < 0 && errno != ENOENT)
			return sbx_err_sys(err, errno, "rename %s", src);
	}
	start_cleaner(rt, rt->trash_dir, NULL);
	return 0;
}

void runtime_collect(struct runtime *rt)
{
	for (size_t i = 0; i < rt->ncleaners;) {
		int st;
		if (waitpid(rt->cleaners[i].pid, &st, WNOHANG) != 0)
			rt->cleaners[i] = rt->cleaners[--rt->ncleaners];
		else
			i++;
	}
}
