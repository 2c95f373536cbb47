/* sbx: the command line of sandboxd, over libsbx.
 *
 * `sbx [--url URL] [--token T] COMMAND [options] [args]`. The daemon's URL
 * and token come from the flags, else SBX_URL / SBX_TOKEN, else
 * ~/.config/sbx/config ("url = ..." and "token = ..." lines), else
 * http://127.0.0.1:8080 without a token. Every command answers --help.
 * Failures print the server's message and code on stderr and exit 1 (2
 * for a usage error); `sbx exec` exits with the command's own status. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/sbx.h"

const char *sbx_url;

static const char help_main[] =
    "Usage: sbx [--url URL] [--token TOKEN] COMMAND [ARGS]\n"
    "\n"
    "The command line of sandboxd: isolated, persistent Linux sandboxes.\n"
    "\n"
    "Commands:\n"
    "  create [ID]            make a sandbox (prints its ID)\n"
    "  ls                     list sandboxes\n"
    "  info ID                a sandbox's state, limits and usage\n"
    "  stop ID...             stop sandboxes (their files stay)\n"
    "  rm ID...               delete sandboxes and everything in them\n"
    "  exec ID -- CMD [ARG]   run a command, output live, its exit status\n"
    "  sh ID                  an interactive shell (a terminal)\n"
    "  cp SRC DST             copy files or directories in or out\n"
    "                         (ID:PATH names a path in a sandbox)\n"
    "  ps ID                  list background processes\n"
    "  logs [-f] ID PROC      a background process's output\n"
    "  kill ID PROC           end a background process and its children\n"
    "  run-code ID FILE       run code in a Python/JavaScript interpreter\n"
    "  snapshot create|ls|info|rm   snapshots of a sandbox's files\n"
    "  image import|ls|info|rm      OCI images sandboxes can run\n"
    "  fork ID [NEWID]        a new sandbox starting as a copy of ID\n"
    "  restore ID SNAP|BACKUP put a sandbox's files back\n"
    "  backup create|ls|info|rm     archives of a directory, kept apart\n"
    "\n"
    "`sbx COMMAND --help` says more. The daemon is found at --url, else\n"
    "$SBX_URL, else the \"url\" of ~/.config/sbx/config, else\n"
    "http://127.0.0.1:8080; its bearer token likewise (--token,\n"
    "$SBX_TOKEN, \"token\").\n";

int cli_say(int code, const char *fmt, ...)
{
	va_list ap;
	fputs("sbx: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int cli_fail(const char *what, const struct sbx_error *err)
{
	if (!strcmp(err->code, "connect"))
		return cli_say(EXIT_FAIL, "cannot reach sandboxd: %s",
		               err->message);
	if (err->status)
		return cli_say(EXIT_FAIL, "%s: %s (%s, HTTP %d)", what,
		               err->message, err->code, err->status);
	return cli_say(EXIT_FAIL, "%s: %s (%s)", what, err->message, err->code);
}

bool cli_help(int argc, char **argv, const char *text)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(text, stdout);
			return true;
		}
	}
	return false;
}

/* ---- configuration ---- */

static char *config_value(const char *key)
{
	char path[4096];
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	if (xdg && *xdg)
		snprintf(path, sizeof(path), "%s/sbx/config", xdg);
	else if (home && *home)
		snprintf(path, sizeof(path), "%s/.config/sbx/config", home);
	else
		return NULL;
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *line = NULL, *found = NULL;
	size_t cap = 0;
	while (!found && getline(&line, &cap, f) > 0) {
		char *p = line + strspn(line, " \t");
		size_t kl = strlen(key);
		if (*p == '#' || strncmp(p, key, kl))
			continue;
		p += kl;
		p += strspn(p, " \t");
		if (*p != '=')
			continue;
		p++;
		p += strspn(p, " \t");
		size_t n = strcspn(p, "\r\n");
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n >= 2 && (p[0] == '"' || p[0] == '\'') &&
		    p[n - 1] == p[0]) {
			p++;
			n -= 2;
		}
		found = strndup(p, n);
	}
	free(line);
	fclose(f);
	return found;
}

/* ---- small helpers ---- */

static void json_line(const char *json)
{
	printf("%s\n", json ? json : "null");
}

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

/* "2026-12-01T19:33:54.556Z" -> "2026-12-01 19:33:54" */
static const char *when(const char *t, char *buf, size_t n)
{
	if (!t || strlen(t) < 19)
		return or_dash(t);
	snprintf(buf, n, "%.10s %.8s", t, t + 11);
	return buf;
}

static const char *bytes_h(uint64_t b, char *buf, size_t n)
{
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
	return buf;
}

/* ---- create, ls, info, stop, rm ---- */

static const char help_create[] =
    "Usage: sbx create [ID] [options]\n"
    "\n"
    "Makes a sandbox and prints its ID (one is made up without ID).\n"
    "\n"
    "  --memory MB        memory limit\n"
    "  --cpus N           CPU limit (may be fractional)\n"
    "  --pids N           process limit\n"
    "  --disk MB          disk limit\n"
    "  --sleep-after SEC  stop it after this many idle seconds\n"
    "  --keep-alive       never stop it for being idle\n"
    "  --from-snapshot S  its files start as snapshot S's\n"
    "  --image NAME       run an image (sbx image ls) instead of the\n"
    "                     host's system\n"
    "  -e, --env K=V      an environment variable (repeatable)\n"
    "  -l, --label K=V    a label (repeatable)\n"
    "  --json             print the sandbox as JSON\n";

static int cmd_create(struct sbx_client *c, int argc, char **argv)
{
	struct sbx_create_opts o = {0};
	struct cli_list env = {0}, labels = {0};
	const char *cpus = NULL;
	uint64_t sleep_after = 0;
	bool json = false;
	const struct cli_opt opts[] = {
	    {"memory", 0, CLI_NUM, {.num = &o.limits.memory_mb}},
	    {"cpus", 0, CLI_STR, {.str = &cpus}},
	    {"pids", 0, CLI_NUM, {.num = &o.limits.pids}},
	    {"disk", 0, CLI_NUM, {.num = &o.limits.disk_mb}},
	    {"sleep-after", 0, CLI_NUM, {.num = &sleep_after}},
	    {"keep-alive", 0, CLI_FLAG, {.flag = &o.keep_alive}},
	    {"from-snapshot", 0, CLI_STR, {.str = &o.from_snapshot}},
	    {"image", 0, CLI_STR, {.str = &o.image}},
	    {"env", 'e', CLI_LIST, {.list = &env}},
	    {"label", 'l', CLI_LIST, {.list = &labels}},
	    {"json", 0, CLI_FLAG, {.flag = &json}},
	    {0},
	};
	int rc = cli_args(argc, argv, help_create, opts, 0, 1);
	if (rc != CLI_GO_ON)
		return rc;
	if (cpus) {
		char *end;
		o.limits.cpus = strtod(cpus, &end);
		if (*end || !(o.limits.cpus > 0)) {
			free(env.v);
			free(labels.v);
			return cli_say(EXIT_USAGE,
			               "--cpus: expected a number, not \"%s\"",
			               cpus);
		}
	}
	o.sleep_after_ms = sleep_after * 1000;
	o.env = env.v;
	o.labels = labels.v;
	if (optind < argc)
		o.id = argv[optind];
	struct sbx_sandbox *s = NULL;
	struct sbx_error err;
	rc = sbx_sandbox_create(c, &o, &s, &err);
	free(env.v);
	free(labels.v);
	if (rc)
		return cli_fail("create", &err);
	if (json)
		json_line(s->json);
	else
		printf("%s\n", s->id);
	sbx_sandbox_free(s);
	return 0;
}

static const char help_ls[] =
    "Usage: sbx ls [--json] [-q]\n"
    "\n"
    "Lists the sandboxes.\n"
    "\n"
    "  --json    one JSON document: {\"sandboxes\": [...]}\n"
    "  -q        IDs only\n";

static int cmd_ls(struct sbx_client *c, int argc, char **argv)
{
	bool json = false, quiet = false;
	const struct cli_opt opts[] = {
	    {"json", 0, CLI_FLAG, {.flag = &json}},
	    {"quiet", 'q', CLI_FLAG, {.flag = &quiet}},
	    {0},
	};
	int rc = cli_args(argc, argv, help_ls, opts, 0, 0);
	if (rc != CLI_GO_ON)
		return rc;
	struct sbx_sandbox *list = NULL;
	size_t n = 0;
	struct sbx_error err;
	if (sbx_sandbox_list(c, &list, &n, &err))
		return cli_fail("ls", &err);
	if (json) {
		printf("{\"sandboxes\":[");
		for (size_t i = 0; i < n; i++)
			printf("%s%s", i ? "," : "", list[i].json);
		printf("]}\n");
	} else if (quiet) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", list[i].id);
	} else {
		printf("%-24s %-8s %-19s  %-19s  %8s %5s\n", "ID", "STATE",
		       "CREATED", "LAST ACTIVE", "MEMORY", "CPUS");
		for (size_t i = 0; i < n; i++) {
			char a[32], b[32], m[32];
			snprintf(m, sizeof(m), "%lluM",
			         (unsigned long long)list[i].limits.memory_mb);
			printf("%-24s %-8s %-19s  %-19s  %8s %5g\n",
			       or_dash(list[i].id), or_dash(list[i].state),
			       when(list[i].created_at, a, sizeof(a)),
			       when(list[i].last_active_at, b, sizeof(b)), m,
			       list[i].limits.cpus);
		}
	}
	sbx_sandbox_list_free(list, n);
	return 0;
}

static const char help_info[] =
    "Usage: sbx info ID [--json]\n"
    "\n"
    "Shows a sandbox: state, times, limits, usage.\n";

static int cmd_info(struct sbx_client *c, int argc, char **argv)
{
	bool json = false;
	const struct cli_opt opts[] = {
	    {"json", 0, CLI_FLAG, {.flag = &json}},
	    {0},
	};
	int rc = cli_args(argc, argv, help_info, opts, 1, 1);
	if (rc != CLI_GO_ON)
		return rc;
	struct sbx_sandbox *s = NULL;
	struct sbx_error err;
	if (sbx_sandbox_info(c, argv[optind], &s, &err))
		return cli_fail(argv[optind], &err);
	if (json) {
		json_line(s->json);
	} else {
		char a[32], b[32];
		printf("id:           %s\n", s->id);
		printf("state:        %s\n", or_dash(s->state));
		printf("created:      %s\n", when(s->created_at, a, sizeof(a)));
		printf("last active:  %s\n",
		       when(s->last_active_at, b, sizeof(b)));
		printf("limits:       memory %lluM, cpus %g, pids %llu, disk "
		       "%lluM\n",
		       (unsigned long long)s->limits.memory_mb, s->limits.cpus,
		       (unsigned long long)s->limits.pids,
		       (unsigned long long)s->limits.disk_mb);
		if (s->keep_alive)
			printf("sleep after:  never (keep-alive)\n");
		else
			printf("sleep after:  %llus\n",
			       (unsigned long long)s->sleep_after_ms / 1000);
		if (s->has_usage)
			printf("usage:        memory %s, cpu %llums, pids "
			       "%llu, disk %s\n",
			       bytes_h(s->usage.memory_bytes, a, sizeof(a)),
			       (unsigned long long)s->usage.cpu_ms,
			       (unsigned long long)s->usage.pids,
			       bytes_h(s->usage.disk_bytes, b, sizeof(b)));
	}
	sbx_sandbox_free(s);
	return 0;
}

static const char help_stop[] =
    "Usage: sbx stop ID...\n"
    "\n"
    "Stops sandboxes: their processes end, their files stay; the next\n"
    "request starts them again.\n";
static const char help_rm[] =
    "Usage: sbx rm ID...\n"
    "\n"
    "Deletes sandboxes with all their files. Deleting one that does not\n"
    "exist is not an error.\n";

static int
each_id(struct sbx_client *c, int argc, char **argv, const char *text,
        int (*fn)(struct sbx_client *, const char *, struct sbx_error *))
{
	static const struct cli_opt opts[] = {{0}};
	int rc = cli_args(argc, argv, text, opts, 1, CLI_ANY);
	if (rc != CLI_GO_ON)
		return rc;
	rc = 0;
	for (int i = optind; i < argc; i++) {
		struct sbx_error err;
		if (fn(c, argv[i], &err))
			rc = cli_fail(argv[i], &err);
	}
	return rc;
}

/* ---- exec ---- */

static const char help_exec[] =
    "Usage: sbx exec [options] ID [--] CMD [ARG...]\n"
    "       sbx exec [options] ID -c 'SHELL COMMAND'\n"
    "\n"
    "Runs a command in a sandbox, its stdout and stderr streamed as it\n"
    "writes them, and exits with its exit status (124 after a timeout).\n"
    "CMD runs without a shell, found on the sandbox's PATH; -c runs a bash\n"
    "command line in the session (cd and export carry over to the next).\n"
    "When stdin is not a terminal it is read to its end and given to the\n"
    "command (at most 512 KiB; use `sbx cp` for data).\n"
    "\n"
    "  -c, --command STR  a bash command line instead of CMD\n"
    "  -w, --cwd DIR      working directory (under /workspace)\n"
    "  -e, --env K=V      an environment variable (repeatable)\n"
    "  -t, --timeout SEC  kill the command's whole tree after SEC\n"
    "  -s, --session SID  run in this session (default: the default one)\n"
    "  -n, --no-stdin     do not read stdin\n";

#define STDIN_MAX (512u << 10)

int cli_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int out_to_fds(void *ud, int stream, const void *data, size_t len)
{
	(void)ud;
	/* a closed stdout (sbx exec ... | head) stops the command */
	return cli_write_all(stream == SBX_STDERR ? 2 : 1, data, len);
}

/* stdin to its end; -1 past max (*len then says so), -2 on a read error */
static int slurp(int fd, char **out, size_t *len, size_t max)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -2;
	for (;;) {
		if (n == cap) {
			if (cap > max) {
				free(buf);
				return -1;
			}
			char *b = realloc(buf, cap * 2);
			if (!b) {
				free(buf);
				return -2;
			}
			buf = b;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return -2;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		free(buf);
		return -1;
	}
	*out = buf;
	*len = n;
	return 0;
}

static int cmd_exec(struct sbx_client *c, int argc, char **argv)
{
	struct sbx_exec_opts o = {0};
	struct cli_list env = {0};
	uint64_t timeout = 0;
	bool no_stdin = false, force_stdin = false;
	const struct cli_opt opts[] = {
	    {"command", 'c', CLI_STR, {.str = &o.command}},
	    {"cwd", 'w', CLI_STR, {.str = &o.cwd}},
	    {"env", 'e', CLI_LIST, {.list = &env}},
	    {"timeout", 't', CLI_NUM, {.num = &timeout}},
	    {"session", 's', CLI_STR, {.str = &o.session}},
	    {"no-stdin", 'n', CLI_FLAG, {.flag = &no_stdin}},
	    {"stdin", 'i', CLI_FLAG, {.flag = &force_stdin}},
	    {0},
	};
	/* CLI_REST: options end at the first operand (the ID), so the
	 * command's own flags are never taken for sbx's */
	int rc = cli_args(argc, argv, help_exec, opts, 1, CLI_REST);
	if (rc != CLI_GO_ON)
		return rc;
	o.env = env.v;
	o.timeout_ms = timeout * 1000;
	const char *id = argv[optind++];
	/* options may also follow the ID: sbx exec ID -c '...' */
	if (!o.command && optind + 1 < argc && !strcmp(argv[optind], "-c")) {
		o.command = argv[optind + 1];
		optind += 2;
	}
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	if (o.command && optind < argc)
		return cli_say(EXIT_USAGE,
		               "exec: give -c or a command, not both");
	if (!o.command) {
		if (optind >= argc)
			return cli_usage(help_exec);
		o.argv = (const char *const *)&argv[optind];
	}
	char *in = NULL;
	size_t inlen = 0;
	if (!no_stdin && (force_stdin || !isatty(0))) {
		int r = slurp(0, &in, &inlen, STDIN_MAX);
		if (r == -1)
			return cli_say(
			    EXIT_FAIL,
			    "exec: stdin is larger than %u KiB; copy "
			    "it in with `sbx cp` and redirect from "
			    "the file",
			    STDIN_MAX >> 10);
		if (r == -2)
			return cli_say(EXIT_FAIL, "exec: reading stdin: %s",
			               strerror(errno));
		o.stdin_data = in;
		o.stdin_len = inlen;
	}
	struct sbx_exec_result r;
	struct sbx_error err;
	rc = sbx_exec_stream(c, id, &o, out_to_fds, NULL, &r, &err);
	free(in);
	free(env.v);
	if (rc) {
		if (!strcmp(err.code, "aborted"))
			return EXIT_FAIL; /* our stdout closed */
		int rc2 = cli_fail(id, &err);
		/* as a shell says it: 127 not found, 126 found but not run */
		if (!strcmp(err.code, "exec_failed"))
			rc2 = strstr(err.message, "No such file") ? 127 : 126;
		return rc2;
	}
	if (r.timed_out)
		cli_say(0, "exec: the command timed out and was killed");
	int code = r.exit_code;
	sbx_exec_result_clear(&r);
	return code;
}

/* ---- processes ---- */

static const char help_ps[] =
    "Usage: sbx ps ID [--json]\n"
    "\n"
    "Lists a sandbox's background processes (running, and the last that\n"
    "ended).\n";

static int cmd_ps(struct sbx_client *c, int argc, char **argv)
{
	bool json = false;
	const struct cli_opt opts[] = {
	    {"json", 0, CLI_FLAG, {.flag = &json}},
	    {0},
	};
	int rc = cli_args(argc, argv, help_ps, opts, 1, 1);
	if (rc != CLI_GO_ON)
		return rc;
	struct sbx_error err;
	if (json) {
		char *body = NULL, *path = NULL;
		if (asprintf(&path, "/v1/sandbox/%s/process", argv[optind]) < 0)
			return cli_say(EXIT_FAIL, "out of memory");
		rc = sbx_request(c, "GET", path, NULL, NULL, &body, NULL, &err);
		free(path);
		if (rc)
			return cli_fail(argv[optind], &err);
		printf("%s\n", body);
		free(body);
		return 0;
	}
	struct sbx_process *list = NULL;
	size_t n = 0;
	if (sbx_process_list(c, argv[optind], &list, &n, &err))
		return cli_fail(argv[optind], &err);
	printf("%-20s %7s %-10s %4s  %-19s  %s\n", "ID", "PID", "STATUS",
	       "EXIT", "STARTED", "COMMAND");
	for (size_t i = 0; i < n; i++) {
		char t[32], ec[16] = "-";
		if (list[i].has_exit_code)
			snprintf(ec, sizeof(ec), "%d", list[i].exit_code);
		printf("%-20s %7ld %-10s %4s  %-19s  %s\n", or_dash(list[i].id),
		       list[i].pid, or_dash(list[i].status), ec,
		       when(list[i].start_time, t, sizeof(t)),
		       or_dash(list[i].command));
	}
	sbx_process_list_free(list, n);
	return 0;
}

static const char help_logs[] =
    "Usage: sbx logs [-f] ID PROC\n"
    "\n"
    "Prints a background process's kept output (stdout to stdout, stderr\n"
    "to stderr). With -f, follows it live until the process ends, then\n"
    "exits with its exit code.\n";

static int cmd_logs(struct sbx_client *c, int argc, char **argv)
{
	bool follow = false;
	const struct cli_opt opts[] = {
	    {"follow", 'f', CLI_FLAG, {.flag = &follow}},
	    {0},
	};
	int rc = cli_args(argc, argv, help_logs, opts, 2, 2);
	if (rc != CLI_GO_ON)
		return rc;
	const char *id = argv[optind], *pid = argv[optind + 1];
	struct sbx_error err;
	if (follow) {
		int code = 0;
		if (sbx_process_stream(c, id, pid, 0, out_to_fds, NULL, &code,
		                       &err))
			return strcmp(err.code, "aborted") ? cli_fail(pid, &err)
			                                   : EXIT_FAIL;
		return code;
	}
	struct sbx_exec_result r;
	if (sbx_process_logs(c, id, pid, &r, &err))
		return cli_fail(pid, &err);
	cli_write_all(1, r.out, r.out_len);
	cli_write_all(2, r.err, r.err_len);
	sbx_exec_result_clear(&r);
	return 0;
}

static const char help_kill[] =
    "Usage: sbx kill ID PROC\n"
    "\n"
    "Ends a background process and its whole tree (TERM, then KILL after\n"
    "5 seconds).\n";

static int cmd_kill(struct sbx_client *c, int argc, char **argv)
{
	if (argc != 3 || argv[1][0] == '-')
		return cli_usage(help_kill);
	struct sbx_error err;
	if (sbx_process_kill(c, argv[1], argv[2], &err))
		return cli_fail(argv[2], &err);
	return 0;
}

/* ---- run-code ---- */

static const char help_run_code[] =
    "Usage: sbx run-code ID [--lang LANG] FILE\n"
    "\n"
    "Runs FILE (- for stdin) as one cell in a fresh interpreter context\n"
    "of the sandbox: its output streams, the value of its last\n"
    "expression is printed, an error prints its traceback and exits 1.\n"
    "\n"
    "  -l, --lang LANG    python (default), javascript or typescript\n"
    "  -t, --timeout SEC  interrupt the cell after SEC\n";

static int cell_event(void *ud, const char *event, const char *data)
{
	int *failed = ud;
	json_t *j = json_loads(data, 0, NULL);
	if (!strcmp(event, "stdout") || !strcmp(event, "stderr")) {
		json_t *t = json_object_get(j, "text");
		if (json_is_string(t))
			cli_write_all(strcmp(event, "stdout") ? 2 : 1,
			              json_string_value(t),
			              json_string_length(t));
	} else if (!strcmp(event, "result")) {
		json_t *t = json_object_get(j, "text/plain");
		if (json_is_string(t))
			printf("%s\n", json_string_value(t));
		fflush(stdout);
	} else if (!strcmp(event, "error")) {
		json_t *tb = json_object_get(j, "traceback");
		size_t i;
		json_t *l;
		*failed = 1;
		if (json_array_size(tb)) {
			json_array_foreach(tb, i, l)
			{
				if (json_is_string(l))
					fprintf(stderr, "%s\n",
					        json_string_value(l));
			}
		} else {
			const char *n = json_string_value(
			               json_object_get(j, "name")),
			           *v = json_string_value(
			               json_object_get(j, "value")),
			           *m = json_string_value(
			               json_object_get(j, "error"));
			fprintf(stderr, "%s: %s\n", n ? n : "error",
			        v   ? v
			        : m ? m
			            : data);
		}
	} else if (!strcmp(event, "notice")) {
		json_t *m = json_object_get(j, "message");
		if (json_is_string(m))
			cli_say(0, "%s", json_string_value(m));
	} else if (!strcmp(event, "done")) {
		if (json_is_true(json_object_get(j, "timedOut"))) {
			cli_say(0, "run-code: the cell timed out");
			*failed = 1;
		}
		json_t *e = json_object_get(j, "error");
		if (json_is_true(e) || json_is_object(e))
			*failed = 1;
	}
	json_decref(j);
	return 0;
}

/* the file's whole text, read from a path or stdin */
static char *read_text(const char *path)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	char *buf = NULL;
	size_t n = 0;
	if (fd < 0)
		return NULL;
	int r = slurp(fd, &buf, &n, 64u << 20);
	if (fd)
		close(fd);
	if (r)
		return NULL;
	char *t = realloc(buf, n + 1);
	if (!t) {
		free(buf);
		return NULL;
	}
	t[n] = '\0';
	return t;
}

static int cmd_run_code(struct sbx_client *c, int argc, char **argv)
{
	const char *lang = "python";
	uint64_t timeout = 0;
	const struct cli_opt opts[] = {
	    {"lang", 'l', CLI_STR, {.str = &lang}},
	    {"timeout", 't', CLI_NUM, {.num = &timeout}},
	    {0},
	};
	int rc = cli_args(argc, argv, help_run_code, opts, 2, 2);
	if (rc != CLI_GO_ON)
		return rc;
	const char *id = argv[optind], *file = argv[optind + 1];
	char *code = read_text(file);
	if (!code)
		return cli_say(EXIT_FAIL, "%s: %s", file, strerror(errno));
	struct sbx_error err;
	char *cid = NULL;
	int failed = 0;
	rc = 0;
	if (sbx_context_create(c, id, lang, NULL, &cid, &err)) {
		free(code);
		return cli_fail(id, &err);
	}
	if (sbx_context_run(c, id, cid, code, timeout * 1000, cell_event,
	                    &failed, &err))
		rc = cli_fail(file, &err);
	else if (failed)
		rc = EXIT_FAIL;
	fflush(stdout);
	if (sbx_context_delete(c, id, cid, &err))
		cli_fail(cid, &err);
	free(cid);
	free(code);
	return rc;
}

/* ---- main ---- */

struct command {
	const char *name;
	int (*fn)(struct sbx_client *, int, char **);
	const char *help;
};

static int cmd_stop(struct sbx_client *c, int argc, char **argv)
{
	return each_id(c, argc, argv, help_stop, sbx_sandbox_stop);
}

static int cmd_rm(struct sbx_client *c, int argc, char **argv)
{
	return each_id(c, argc, argv, help_rm, sbx_sandbox_delete);
}

static const struct command commands[] = {
    {"create", cmd_create, help_create},
    {"ls", cmd_ls, help_ls},
    {"list", cmd_ls, help_ls},
    {"info", cmd_info, help_info},
    {"stop", cmd_stop, help_stop},
    {"rm", cmd_rm, help_rm},
    {"exec", cmd_exec, help_exec},
    {"sh", cmd_sh, help_sh},
    {"cp", cmd_cp, help_cp},
    {"ps", cmd_ps, help_ps},
    {"logs", cmd_logs, help_logs},
    {"kill", cmd_kill, help_kill},
    {"run-code", cmd_run_code, help_run_code},
    {"snapshot", cmd_snapshot, help_snapshot},
    {"fork", cmd_fork, help_fork},
    {"restore", cmd_restore, help_restore},
    {"backup", cmd_backup, help_backup},
    {"image", cmd_image, help_image},
};

int main(int argc, char **argv)
{
	const char *url = NULL, *token = NULL;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(help_main, stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("sbx %s\n", LIBSBX_VERSION);
			return 0;
		} else if ((!strcmp(a, "--url") || !strcmp(a, "--token")) &&
		           i + 1 < argc) {
			*(a[2] == 'u' ? &url : &token) = argv[++i];
		} else if (!strncmp(a, "--url=", 6)) {
			url = a + 6;
		} else if (!strncmp(a, "--token=", 8)) {
			token = a + 8;
		} else {
			cli_say(0, "unknown option %s", a);
			return cli_usage(help_main);
		}
	}
	if (i >= argc)
		return cli_usage(help_main);
	const char *name = argv[i];
	if (!strcmp(name, "help")) {
		for (size_t k = 0;
		     i + 1 < argc && k < sizeof(commands) / sizeof(commands[0]);
		     k++)
			if (!strcmp(commands[k].name, argv[i + 1])) {
				fputs(commands[k].help, stdout);
				return 0;
			}
		fputs(help_main, stdout);
		return 0;
	}
	const struct command *cmd = NULL;
	for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (!strcmp(commands[k].name, name))
			cmd = &commands[k];
	if (!cmd) {
		cli_say(0, "unknown command \"%s\"", name);
		return cli_usage(help_main);
	}
	/* --help needs no daemon, and no configuration */
	int cargc = argc - i;
	char **cargv = argv + i;
	if (cmd->fn != cmd_exec && cli_help(cargc, cargv, cmd->help))
		return 0;
	if (cmd->fn == cmd_exec && cargc > 1 &&
	    (!strcmp(cargv[1], "--help") || !strcmp(cargv[1], "-h"))) {
		fputs(cmd->help, stdout);
		return 0;
	}

	char *cfg_url = NULL, *cfg_token = NULL;
	if (!url)
		url = getenv("SBX_URL");
	if (!url || !*url)
		url = cfg_url = config_value("url");
	if (!url || !*url)
		url = "http://127.0.0.1:8080";
	if (!token)
		token = getenv("SBX_TOKEN");
	if (!token || !*token)
		token = cfg_token = config_value("token");
	sbx_url = url;

	struct sbx_error err;
	struct sbx_client *c = sbx_client_new(url, token, &err);
	if (!c)
		return cli_fail("sbx", &err);
	optind = 1;
	int rc = cmd->fn(c, cargc, cargv);
	fflush(stdout);
	sbx_client_free(c);
	free(cfg_url);
	if (cfg_token) {
		explicit_bzero(cfg_token, strlen(cfg_token));
		free(cfg_token);
	}
	return rc;
}
