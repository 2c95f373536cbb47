/* sandboxd: one process, one event loop. main() parses the flags, opens
 * the state dir (registry, runtime), listens, and runs the loop until
 * SIGTERM/SIGINT; then it stops every sandbox (files kept) and exits 0. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "api/api.h"
#include "core/config.h"
#include "core/fleet.h"
#include "core/llm.h"
#include "http/http.h"
#include "lib/loop.h"
#include "core/manager.h"
#include "lib/log.h"

static void on_signal(struct loop_watch *w, uint32_t events)
{
	struct signalfd_siginfo si;
	(void)events;
	if (read(w->fd, &si, sizeof(si)) == sizeof(si)) {
		log_info("event=shutdown signal=%s",
		         strsignal((int)si.ssi_signo));
		loop_stop(w->data);
	}
}

/* Run from a sealed in-memory copy of our binary (isolation.md A.8,
 * CVE-2019-5736): every process the daemon forks into a sandbox then has
 * a /proc/self/exe that names no host file and can never be written, even
 * if sandboxed code gets the kernel to exec it (a "#!/proc/self/exe").
 * Whether that is done already is read from /proc/self/exe itself (a memfd
 * with our seals), never from the environment, which whoever starts the
 * daemon controls. */
#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

static bool running_sealed(int exe)
{
	int seals = fcntl(exe, F_GET_SEALS);
	return seals >= 0 && (seals & SEALS) == SEALS;
}

static void reexec_sealed(char **argv)
{
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int mfd = -1;
	struct stat st;
	if (in >= 0 && running_sealed(in)) {
		close(in);
		return;
	}
	mfd = memfd_create("sandboxd", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (in < 0 || mfd < 0 || fstat(in, &st) < 0)
		goto fail;
	for (off_t left = st.st_size; left > 0;) {
		ssize_t n = sendfile(mfd, in, NULL, (size_t)left);
		if (n <= 0)
			goto fail;
		left -= n;
	}
	if (fcntl(mfd, F_ADD_SEALS, SEALS) < 0)
		goto fail;
	close(in);
	in = -1;
	fexecve(mfd, argv, environ);
fail:
	log_warn("event=unsealed running from the host binary: %s",
	         strerror(errno));
	if (in >= 0)
		close(in);
	if (mfd >= 0)
		close(mfd);
}

/* One fd per running sandbox (its socket), plus a few per request and
 * per command: 10,000 sandboxes with work in flight want more than the
 * 20,000 or 65,536 hosts usually give. Root may raise its hard limit up
 * to fs.nr_open; where it may not (no CAP_SYS_RESOURCE), take the hard
 * limit.
 * Sandboxes never inherit it: init caps every command's limit at 16,384
 * (runtime/init.c set_rlimits). */
static void raise_nofile(void)
{
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) < 0)
		return;
	rlim_t want = 1u << 20;
	char buf[32];
	int fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		buf[n] = '\0';
		rlim_t nr = strtoul(buf, NULL, 10);
		if (nr && nr < want)
			want = nr;
	}
	if (nofile.rlim_max < want) {
		struct rlimit up = {want, want};
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			return;
	}
	if (nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
}

static void tenant_quota(void *data, const char *tenant,
                         uint32_t *max_sandboxes, uint32_t *max_running)
{
	auth_quota(data, tenant, max_sandboxes, max_running);
}

static bool is_loopback(const char *addr)
{
	struct in_addr a4;
	if (inet_pton(AF_INET, addr, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return !strcmp(addr, "::1");
}

static void idle(void *data)
{
	http_run(data);
}

static int idle_timeout(void *data)
{
	return http_timeout_ms(data);
}

int main(int argc, char **argv)
{
	struct config cfg;
	struct sbx_err err = {0};
	int r = config_parse(&cfg, argc, argv);
	if (r)
		return r > 0 ? 0 : 2;
	if (geteuid() == 0)
		reexec_sealed(argv);
	log_set_level(cfg.log_level);
	if (geteuid() != 0) {
		fprintf(stderr, "sandboxd: must run as root (it creates "
		                "namespaces, mounts and cgroups)\n");
		return 1;
	}
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);

	struct loop *loop = loop_new();
	struct manager *m = NULL;
	struct api api = {0};
	struct http_server *http = NULL;
	if (!loop || manager_new(&cfg, loop, &m, &err) < 0)
		goto fatal;
	api.m = m;
	if (cfg.tokens_path && auth_load(cfg.tokens_path, &api.auth, &err) < 0)
		goto fatal;
	if (cfg.llm_url && llm_new(loop, &cfg, &m->llm, &err) < 0)
		goto fatal;
	if (cfg.etcd_url && fleet_new(m, &m->fleet, &err) < 0)
		goto fatal;
	if (api.auth) {
		m->quota_of = tenant_quota;
		m->quota_data = api.auth;
	}
	/* without tokens anyone who can connect owns every sandbox: only
	 * this machine's users may */
	if (!api.auth && !is_loopback(cfg.listen_addr)) {
		sbx_err_set(&err, EPERM,
		            "refusing to listen on %s without --tokens",
		            cfg.listen_addr);
		goto fatal;
	}
	/* a fleet's node names itself in every answer (a copy: the answers
	 * given at shutdown come after fleet_free) */
	char node_name[64] = "";
	if (m->fleet)
		snprintf(node_name, sizeof(node_name), "%s",
		         fleet_node_name(m->fleet));
	const char *node_hdr[] = {"Sandboxd-Node", node_name, NULL};
	struct http_config hc = {.addr = cfg.listen_addr,
	                         .port = cfg.port,
	                         .headers = m->fleet ? node_hdr : NULL,
	                         .max_body = cfg.max_body,
	                         .begin = router_begin,
	                         .handler = router_handle,
	                         .handler_data = &api};
	if (http_start(loop, &hc, &http, &err) < 0)
		goto fatal;
	struct loop_watch sigw = {.fd = signalfd(-1, &mask, SFD_CLOEXEC),
	                          .cb = on_signal,
	                          .data = loop};
	if (sigw.fd < 0 || loop_add(loop, &sigw, EPOLLIN) < 0) {
		sbx_err_sys(&err, errno, "signalfd");
		if (sigw.fd >= 0)
			close(sigw.fd);
		goto fatal;
	}
	api_e2b_start(&api);
	loop_set_idle(loop, idle, http, idle_timeout);
	log_info("event=listening addr=%s port=%u state=%s", cfg.listen_addr,
	         cfg.port, m->rt->state_dir);
	r = loop_run(loop);
	/* a question to the model still out is answered 502 now */
	llm_free(m->llm);
	m->llm = NULL;
	api_e2b_stop(&api);
	struct fleet *fleet = m->fleet;
	fleet_close(fleet); /* its work ends with the sandboxes, next */
	/* stopping sandboxes answers the requests still waiting on them; a
	 * request that still comes in meets no manager (503) */
	manager_free(m);
	fleet_free(fleet);
	api.m = NULL;
	http_run(http);
	http_stop(http);
	loop_del(loop, &sigw);
	close(sigw.fd);
	loop_free(loop);
	auth_free(api.auth);
	log_info("event=stopped");
	return r < 0 ? 1 : 0;

fatal:
	/* the same teardown as a stop, of whatever was made: a refused start
	 * leaves no cgroup, child or helper behind */
	log_error("event=fatal %s", err.msg[0] ? err.msg : "out of memory");
	if (m) {
		llm_free(m->llm);
		m->llm = NULL;
		struct fleet *f = m->fleet;
		fleet_close(f);
		manager_free(m);
		fleet_free(f);
	}
	if (http)
		http_stop(http);
	loop_free(loop);
	auth_free(api.auth);
	return 1;
}
