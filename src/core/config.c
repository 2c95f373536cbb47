#include "core/config.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/network.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/util.h"

static const char usage[] =
    "Usage: sandboxd [options]\n"
    "\n"
    "Serves isolated, persistent Linux sandboxes over HTTP: the Duet room\n"
    "API (/api/rooms) and the /v1 API. Must run as root.\n"
    "\n"
    "Options:\n"
    "  --listen ADDR:PORT       address to listen on (default 127.0.0.1:8080)\n"
    "  --state-dir DIR          sandboxes' files and the registry\n"
    "                           (default /var/lib/sandboxd)\n"
    "  --sleep-after DURATION   stop a sandbox after this long without\n"
    "                           requests or running commands; its files stay\n"
    "                           (default 10m)\n"
    "  --exec-timeout DURATION  kill a command's whole process tree after\n"
    "                           this long (default 10m)\n"
    "  --memory SIZE            memory limit per sandbox (default 1G)\n"
    "  --pids N                 process limit per sandbox (default 512)\n"
    "  --cpus N                 CPU limit per sandbox, may be fractional\n"
    "                           (default 1)\n"
    "  --disk SIZE              disk limit per sandbox (default 10G; 0: none)\n"
    "  --store-size SIZE        size of the btrfs store holding all "
    "sandboxes'\n"
    "                           files (default: 90%% of the state dir's free\n"
    "                           space when first made; 0: plain directories,\n"
    "                           no disk limits)\n"
    "  --tenant-disk SIZE       disk limit for all of one tenant's sandboxes\n"
    "                           and snapshots together, shared data counted\n"
    "                           once (btrfs store only; default 0: none)\n"
    "  --max-output SIZE        keep at most this much of each of a\n"
    "                           command's stdout and stderr; the rest is\n"
    "                           dropped and flagged (default 16M); also\n"
    "                           the most a client's maxOutputBytes may ask\n"
    "  --max-process-logs SIZE  output of background processes kept per\n"
    "                           sandbox, all together (each keeps at most\n"
    "                           --max-output); the oldest goes first,\n"
    "                           ended processes' before running ones'\n"
    "                           (default 64M)\n"
    "  --max-session-env SIZE   exported environment the sessions of one\n"
    "                           sandbox keep, all together, counted as\n"
    "                           execve counts it; a command that would\n"
    "                           exceed it leaves its session as it was, and\n"
    "                           says so on its stderr (default 4M)\n"
    "  --file-timeout DURATION  end a file operation (file API) that shows\n"
    "                           no progress, nor its once-a-second sign of\n"
    "                           life, for this long while the daemon waits\n"
    "                           on it (504; default 1m, at least 2s)\n"
    "  --max-body SIZE          largest JSON request body (default 1M)\n"
    "  --uid-base N             first host uid of the sandboxes' uid ranges;\n"
    "                           each sandbox owns 65536 uids from here, in\n"
    "                           ranges reserved host-wide (default "
    "1879048192,\n"
    "                           above systemd's container ranges; a state dir\n"
    "                           keeps the base it was first used with)\n"
    "  --max-ptys N             pseudo-terminals per sandbox, 1 to 4096\n"
    "                           (default 64; the host's kernel.pty.max\n"
    "                           bounds them all together)\n"
    "  --backup-dir DIR         where backups are kept (default: <state-dir>/\n"
    "                           backups), unless --backup-s3\n"
    "  --backup-s3 s3://BUCKET[/PREFIX]\n"
    "                           keep backups in S3-compatible object storage;\n"
    "                           daemons given the same prefix share them\n"
    "  --s3-endpoint URL        the storage's URL (default: AWS S3 of the "
    "region)\n"
    "  --s3-region REGION       signing region (default: $AWS_REGION, else\n"
    "                           us-east-1)\n"
    "  --s3-credentials-file F  an AWS shared-credentials file ([default] or\n"
    "                           $AWS_PROFILE, aws_access_key_id and\n"
    "                           aws_secret_access_key); without it,\n"
    "                           $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY, "
    "else\n"
    "                           $AWS_SHARED_CREDENTIALS_FILE or "
    "~/.aws/credentials\n"
    "  --s3-addressing MODE     path (host/bucket/key), virtual\n"
    "                           (bucket.host/key) or auto (default: path for "
    "an\n"
    "                           IP address or localhost endpoint, else "
    "virtual)\n"
    "  --llm-url URL            the room assistant's model: an "
    "OpenAI-compatible\n"
    "                           chat-completions endpoint (its base, e.g.\n"
    "                           http://127.0.0.1:8081/v1, or the full\n"
    "                           .../chat/completions URL); without it\n"
    "                           POST /api/rooms/{room}/message answers 503\n"
    "  --llm-model NAME         the model to ask for (default: \"default\")\n"
    "  --llm-key-file FILE      a file holding the endpoint's API key, sent "
    "as\n"
    "                           a bearer token (never logged, never in a\n"
    "                           sandbox)\n"
    "  --llm-timeout DURATION   the longest wait for the model's answer\n"
    "                           (default 60s; then 504)\n"
    "  --etcd URL               run as a node of a fleet: etcd's client URL\n"
    "                           (http://HOST:PORT) says which node owns each\n"
    "                           sandbox (docs/operations.md \"Running a "
    "fleet\");\n"
    "                           without it, a single daemon\n"
    "  --etcd-ttl DURATION      the node's lease: its sandboxes move "
    "elsewhere\n"
    "                           this long after it died (default 10s)\n"
    "  --advertise-url URL      where other nodes send a request for one of\n"
    "                           this node's sandboxes (307); with --etcd\n"
    "  --node-name NAME         this node's name in the fleet (default: the\n"
    "                           advertised URL's host:port)\n"
    "  --checkpoint-every DURATION\n"
    "                           with --etcd, write active sandboxes' files to\n"
    "                           the backup store this often (and always on an\n"
    "                           idle stop and a drain); what a node loses "
    "when\n"
    "                           it dies (default 60s)\n"
    "  --tokens FILE            bearer tokens, one \"<token> <tenant>\n"
    "                           [maxSandboxes=N] [maxRunning=N]\" per line\n"
    "                           (a tenant's quotas); required to listen\n"
    "                           beyond loopback\n"
    "\n"
    "Operator ceilings (a client's limits above one are refused with 400\n"
    "limit_exceeds_ceiling; defaults from this machine):\n"
    "  --max-memory SIZE        largest memory limit (default: physical RAM)\n"
    "  --max-pids N             largest process limit (default: pid_max/8)\n"
    "  --max-cpus N             largest CPU limit (default: the CPUs this\n"
    "                           daemon may use)\n"
    "  --max-disk SIZE          largest disk limit (default: the size of the\n"
    "                           store, or of the state dir's filesystem)\n"
    "  --max-sandboxes N        sandboxes running at once; beyond it the "
    "least\n"
    "                           recently used idle one is stopped (files "
    "kept),\n"
    "                           or 429 quota_exceeded when none is idle\n"
    "                           (default: the smaller of (total pids)/--pids\n"
    "                           and RAM/128M)\n"
    "  --total-memory SIZE      one memory limit over all sandboxes together\n"
    "                           (default: 3/4 of RAM; 0: none)\n"
    "  --total-pids N           one process limit over all sandboxes together\n"
    "                           (default: pid_max/2; 0: none)\n"
    "A ceiling is never below the matching per-sandbox default; a default not\n"
    "given is lowered to a ceiling that is.\n"
    "\n"
    "Network (docs/api-v1.md \"Network\"):\n"
    "  --network-default MODE   none, allowlist or full: the mode of "
    "sandboxes\n"
    "                           that do not ask (the Duet and Cloudflare\n"
    "                           faces' always; default none)\n"
    "  --dns ADDR[:PORT][,...]  the resolvers the sandboxes' DNS is asked of\n"
    "                           (IPv4; default: /etc/resolv.conf's)\n"
    "  --deny-cidr LIST         ranges no sandbox may reach, comma separated,\n"
    "                           or \"none\" (default: 10.0.0.0/8,\n"
    "                           172.16.0.0/12, 192.168.0.0/16, "
    "100.64.0.0/10);\n"
    "                           the host, loopback, link-local, metadata and\n"
    "                           other sandboxes are never reachable anyway\n"
    "  --net-pool CIDR          the sandboxes' link addresses, a /30 each\n"
    "                           (default 10.231.0.0/16; distinct per daemon)\n"
    "  --preview-domain D       proxy requests for {port}-{id}.D to that\n"
    "                           port in sandbox {id}\n"
    "\n"
    "  --log-level LEVEL        debug, info, warn or error (default info)\n"
    "  --config FILE            read settings from FILE first: one\n"
    "                           \"name = value\" per line, name a flag\n"
    "                           without its dashes (memory = 2G), \"#\"\n"
    "                           comments; a flag on the command line wins\n"
    "                           (the service uses "
    "/etc/sandboxd/sandboxd.conf)\n"
    "  --help                   this text\n"
    "\n"
    "DURATION: 500ms, 30s, 10m, 1h (a plain number is seconds).\n"
    "SIZE: 1048576, 64K, 256M, 1G.\n";

enum {
	OPT_LISTEN = 1,
	OPT_STATE,
	OPT_SLEEP,
	OPT_TIMEOUT,
	OPT_MEMORY,
	OPT_PIDS,
	OPT_CPUS,
	OPT_OUTPUT,
	OPT_BODY,
	OPT_UIDBASE,
	OPT_LOG,
	OPT_TOKENS,
	OPT_DISK,
	OPT_STORE,
	OPT_HELP,
	OPT_PTYS,
	OPT_MAX_MEMORY,
	OPT_MAX_PIDS,
	OPT_MAX_CPUS,
	OPT_MAX_DISK,
	OPT_MAX_SANDBOXES,
	OPT_TOTAL_MEMORY,
	OPT_TOTAL_PIDS,
	OPT_PROCLOGS,
	OPT_SESSENV,
	OPT_FILETIMEOUT,
	OPT_CONFIG,
	OPT_TENANT_DISK,
	OPT_BACKUP_DIR,
	OPT_BACKUP_S3,
	OPT_S3_ENDPOINT,
	OPT_S3_REGION,
	OPT_S3_CREDS,
	OPT_S3_ADDRESSING,
	OPT_NETDEFAULT,
	OPT_DNS,
	OPT_DENY,
	OPT_NETPOOL,
	OPT_PREVIEW,
	OPT_LLM_URL,
	OPT_LLM_MODEL,
	OPT_LLM_KEY,
	OPT_LLM_TIMEOUT,
	OPT_ETCD,
	OPT_ETCD_TTL,
	OPT_ADVERTISE,
	OPT_NODE_NAME,
	OPT_CHECKPOINT,
};

static const struct option opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"state-dir", required_argument, NULL, OPT_STATE},
    {"sleep-after", required_argument, NULL, OPT_SLEEP},
    {"exec-timeout", required_argument, NULL, OPT_TIMEOUT},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"max-output", required_argument, NULL, OPT_OUTPUT},
    {"max-body", required_argument, NULL, OPT_BODY},
    {"uid-base", required_argument, NULL, OPT_UIDBASE},
    {"log-level", required_argument, NULL, OPT_LOG},
    {"tokens", required_argument, NULL, OPT_TOKENS},
    {"disk", required_argument, NULL, OPT_DISK},
    {"store-size", required_argument, NULL, OPT_STORE},
    {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
    {"max-pids", required_argument, NULL, OPT_MAX_PIDS},
    {"max-cpus", required_argument, NULL, OPT_MAX_CPUS},
    {"max-disk", required_argument, NULL, OPT_MAX_DISK},
    {"max-sandboxes", required_argument, NULL, OPT_MAX_SANDBOXES},
    {"total-memory", required_argument, NULL, OPT_TOTAL_MEMORY},
    {"total-pids", required_argument, NULL, OPT_TOTAL_PIDS},
    {"max-process-logs", required_argument, NULL, OPT_PROCLOGS},
    {"max-session-env", required_argument, NULL, OPT_SESSENV},
    {"file-timeout", required_argument, NULL, OPT_FILETIMEOUT},
    {"help", no_argument, NULL, OPT_HELP},
    {"max-ptys", required_argument, NULL, OPT_PTYS},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"tenant-disk", required_argument, NULL, OPT_TENANT_DISK},
    {"backup-dir", required_argument, NULL, OPT_BACKUP_DIR},
    {"backup-s3", required_argument, NULL, OPT_BACKUP_S3},
    {"s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT},
    {"s3-region", required_argument, NULL, OPT_S3_REGION},
    {"s3-credentials-file", required_argument, NULL, OPT_S3_CREDS},
    {"s3-addressing", required_argument, NULL, OPT_S3_ADDRESSING},
    {"network-default", required_argument, NULL, OPT_NETDEFAULT},
    {"dns", required_argument, NULL, OPT_DNS},
    {"deny-cidr", required_argument, NULL, OPT_DENY},
    {"net-pool", required_argument, NULL, OPT_NETPOOL},
    {"preview-domain", required_argument, NULL, OPT_PREVIEW},
    {"llm-url", required_argument, NULL, OPT_LLM_URL},
    {"etcd", required_argument, NULL, OPT_ETCD},
    {"etcd-ttl", required_argument, NULL, OPT_ETCD_TTL},
    {"advertise-url", required_argument, NULL, OPT_ADVERTISE},
    {"node-name", required_argument, NULL, OPT_NODE_NAME},
    {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT},
    {"llm-model", required_argument, NULL, OPT_LLM_MODEL},
    {"llm-key-file", required_argument, NULL, OPT_LLM_KEY},
    {"llm-timeout", required_argument, NULL, OPT_LLM_TIMEOUT},
    {NULL, 0, NULL, 0},
};

static int parse_dns(struct config *cfg, const char *v)
{
	char *copy = strdup(v), *save = NULL;
	int r = 0;
	cfg->ndns = 0;
	for (char *t = strtok_r(copy, ",", &save); t && !r;
	     t = strtok_r(NULL, ",", &save)) {
		struct fw_cidr c;
		unsigned long port = 53;
		char *colon = strchr(t, ':'), *end;
		if (colon) {
			*colon = '\0';
			port = strtoul(colon + 1, &end, 10);
			if (*end || !port || port > 65535)
				r = -1;
		}
		if (r || net_cidr_parse(t, &c) || c.prefix != 32 ||
		    cfg->ndns == sizeof(cfg->dns) / sizeof(cfg->dns[0]))
			r = -1;
		else
			cfg->dns[cfg->ndns++] =
			    (typeof(cfg->dns[0])){c.addr, (uint16_t)port};
	}
	free(copy);
	return r || !cfg->ndns ? -1 : 0;
}

static int parse_deny(struct config *cfg, const char *v)
{
	cfg->ndeny = 0;
	if (!strcmp(v, "none"))
		return 0;
	char *copy = strdup(v), *save = NULL;
	int r = 0;
	for (char *t = strtok_r(copy, ",", &save); t && !r;
	     t = strtok_r(NULL, ",", &save))
		if (cfg->ndeny == sizeof(cfg->deny) / sizeof(cfg->deny[0]) ||
		    net_cidr_parse(t, &cfg->deny[cfg->ndeny++]))
			r = -1;
	free(copy);
	return r;
}

static int bad(const char *flag, const char *v, const char *why)
{
	fprintf(stderr, "sandboxd: %s %s: %s\n", flag, v, why);
	return -1;
}

static int parse_listen(struct config *cfg, const char *v)
{
	const char *colon = strrchr(v, ':');
	if (!colon || colon == v)
		return bad("--listen", v, "expected ADDR:PORT");
	size_t al = (size_t)(colon - v);
	if (v[0] == '[' && al >= 2 && v[al - 1] == ']') { /* [::1]:8080 */
		v++;
		al -= 2;
	}
	if (al >= sizeof(cfg->listen_addr))
		return bad("--listen", v, "address too long");
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end || port > 65535 || colon[1] == '\0')
		return bad("--listen", v, "bad port");
	memcpy(cfg->listen_addr, v, al);
	cfg->listen_addr[al] = '\0';
	cfg->port = (uint16_t)port;
	return 0;
}

/* The configuration file: "name = value" lines, name a long flag without
 * its dashes, "#" comments. Each line becomes a "--name=value" argument
 * placed before the command line's, so a flag given there wins. The
 * strings live until the next config_parse (cfg points into them). */
static char **file_args;
static size_t file_nargs;

static void file_args_free(void)
{
	for (size_t i = 0; i < file_nargs; i++)
		free(file_args[i]);
	free(file_args);
	file_args = NULL;
	file_nargs = 0;
}

static int file_bad(const char *path, unsigned line, const char *what,
                    const char *name)
{
	fprintf(stderr, "sandboxd: %s:%u: %s%s%s\n", path, line, what,
	        name ? " " : "", name ? name : "");
	return -1;
}

static int config_read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "sandboxd: --config %s: %s\n", path,
		        strerror(errno));
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	unsigned no = 0;
	int rc = 0;
	while (rc == 0 && getline(&line, &cap, f) > 0) {
		no++;
		char *k = line + strspn(line, " \t");
		if (*k == '#' || *k == '\n' || *k == '\r' || !*k)
			continue;
		char *eq = strchr(k, '=');
		if (!eq) {
			rc = file_bad(path, no, "expected name = value", NULL);
			break;
		}
		char *ke = eq;
		while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t'))
			ke--;
		*ke = '\0';
		if (!strncmp(k, "--", 2))
			k += 2;
		char *v = eq + 1;
		v += strspn(v, " \t");
		size_t vl = strcspn(v, "\r\n");
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		if (vl >= 2 && (v[0] == '"' || v[0] == '\'') &&
		    v[vl - 1] == v[0]) {
			v++;
			vl -= 2;
		}
		v[vl] = '\0';
		const struct option *o = opts;
		while (o->name && strcmp(o->name, k))
			o++;
		if (!o->name || o->has_arg != required_argument ||
		    o->val == OPT_CONFIG) {
			rc = file_bad(path, no, "unknown setting", k);
			break;
		}
		char **more =
		    realloc(file_args, (file_nargs + 1) * sizeof(char *));
		char *arg = NULL;
		if (!more || asprintf(&arg, "--%s=%s", k, v) < 0) {
			if (more)
				file_args = more;
			rc = file_bad(path, no, "out of memory", NULL);
			break;
		}
		file_args = more;
		file_args[file_nargs++] = arg;
	}
	free(line);
	fclose(f);
	return rc;
}

/* --config FILE (or --config=FILE) on the command line, or NULL. */
static const char *config_path(int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			path = argv[++i];
		else if (!strncmp(argv[i], "--config=", 9))
			path = argv[i] + 9;
	}
	return path;
}

int config_parse(struct config *cfg, int argc, char **argv)
{
	static char **merged;
	const char *path = config_path(argc, argv);
	file_args_free();
	free(merged);
	merged = NULL;
	if (path && config_read_file(path))
		return -1;
	if (file_nargs) {
		merged = calloc((size_t)argc + file_nargs + 1, sizeof(char *));
		if (!merged)
			return bad("--config", path, "out of memory");
		merged[0] = argv[0];
		memcpy(merged + 1, file_args, file_nargs * sizeof(char *));
		memcpy(merged + 1 + file_nargs, argv + 1,
		       (size_t)(argc - 1) * sizeof(char *));
		argc += (int)file_nargs;
		argv = merged;
	}
	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->listen_addr, "127.0.0.1");
	cfg->port = 8080;
	cfg->state_dir = "/var/lib/sandboxd";
	cfg->sleep_after_ms = 10 * 60 * 1000;
	cfg->exec_timeout_ms = 10 * 60 * 1000;
	cfg->limits = (struct cgroup_limits){
	    .memory_bytes = 1ull << 30, .pids = 512, .cpu_millis = 1000};
	cfg->max_output = 16u << 20;
	cfg->max_process_logs = 64u << 20;
	cfg->max_session_env = 4u << 20;
	cfg->file_timeout_ms = 60 * 1000;
	cfg->disk_bytes = 10ull << 30;
	cfg->store_bytes = UINT64_MAX;
	cfg->max_body = 1u << 20;
	cfg->uid_base = CONFIG_UID_BASE_DEFAULT;
	cfg->max_ptys = CONFIG_MAX_PTYS_DEFAULT;
	cfg->log_level = LOG_INFO;
	parse_deny(cfg,
	           "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10");
	net_cidr_parse("10.231.0.0/16", &cfg->net_pool);
	cfg->llm_model = "default";
	cfg->llm_timeout_ms = 60 * 1000;
	cfg->etcd_ttl_s = 10;
	cfg->checkpoint_every_ms = 60 * 1000;

	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint64_t v;
		char *end;
		switch (c) {
		case OPT_LISTEN:
			if (parse_listen(cfg, optarg))
				return -1;
			break;
		case OPT_STATE:
			if (!optarg[0])
				return bad("--state-dir", optarg, "empty");
			cfg->state_dir = optarg;
			break;
		case OPT_SLEEP:
		case OPT_TIMEOUT:
			if (parse_duration_ms(optarg, &v) || v == 0)
				return bad(c == OPT_SLEEP ? "--sleep-after"
				                          : "--exec-timeout",
				           optarg,
				           "expected a duration like 30s");
			*(c == OPT_SLEEP ? &cfg->sleep_after_ms
			                 : &cfg->exec_timeout_ms) = v;
			break;
		case OPT_MEMORY:
		case OPT_MAX_MEMORY:
			if (parse_size(optarg, &v) || v < (16u << 20) ||
			    v > (1ull << 50))
				return bad(c == OPT_MEMORY ? "--memory"
				                           : "--max-memory",
				           optarg,
				           "expected a size of at least 16M");
			*(c == OPT_MEMORY ? &cfg->limits.memory_bytes
			                  : &cfg->max_limits.memory_bytes) = v;
			cfg->given |=
			    c == OPT_MEMORY ? CFG_MEMORY : CFG_MAX_MEMORY;
			break;
		case OPT_PIDS:
		case OPT_MAX_PIDS:
			v = strtoull(optarg, &end, 10);
			if (*end || !*optarg || v < 8 || v > 4194304)
				return bad(
				    c == OPT_PIDS ? "--pids" : "--max-pids",
				    optarg,
				    "expected a number from 8 to 4194304");
			*(c == OPT_PIDS ? &cfg->limits.pids
			                : &cfg->max_limits.pids) = (uint32_t)v;
			cfg->given |= c == OPT_PIDS ? CFG_PIDS : CFG_MAX_PIDS;
			break;
		case OPT_CPUS:
		case OPT_MAX_CPUS: {
			double d = strtod(optarg, &end);
			if (*end || !(d >= 0.01 && d <= 1024))
				return bad(
				    c == OPT_CPUS ? "--cpus" : "--max-cpus",
				    optarg,
				    "expected a number from 0.01 to 1024");
			*(c == OPT_CPUS ? &cfg->limits.cpu_millis
			                : &cfg->max_limits.cpu_millis) =
			    (uint32_t)(d * 1000 + 0.5);
			cfg->given |= c == OPT_CPUS ? CFG_CPUS : CFG_MAX_CPUS;
			break;
		}
		case OPT_MAX_DISK:
			if (parse_size(optarg, &v) || v < (64u << 20))
				return bad("--max-disk", optarg,
				           "expected a size of at least 64M");
			cfg->max_disk = v;
			cfg->given |= CFG_MAX_DISK;
			break;
		case OPT_MAX_SANDBOXES:
			v = strtoull(optarg, &end, 10);
			if (*end || !*optarg || v < 1 || v > 65536)
				return bad("--max-sandboxes", optarg,
				           "expected a number from 1 to 65536");
			cfg->max_sandboxes = (uint32_t)v;
			cfg->given |= CFG_MAX_SANDBOXES;
			break;
		case OPT_TOTAL_MEMORY:
			if (parse_size(optarg, &v) || (v && v < (64u << 20)))
				return bad(
				    "--total-memory", optarg,
				    "expected 0 or a size of at least 64M");
			cfg->total_memory = v;
			cfg->given |= CFG_TOTAL_MEMORY;
			break;
		case OPT_TOTAL_PIDS:
			v = strtoull(optarg, &end, 10);
			if (*end || !*optarg || (v && v < 8) || v > 4194304)
				return bad(
				    "--total-pids", optarg,
				    "expected 0 or a number from 8 to 4194304");
			cfg->total_pids = v;
			cfg->given |= CFG_TOTAL_PIDS;
			break;
		case OPT_OUTPUT:
		case OPT_BODY:
			if (parse_size(optarg, &v) || v < 1024 ||
			    v > (1ull << 40))
				return bad(c == OPT_OUTPUT ? "--max-output"
				                           : "--max-body",
				           optarg,
				           "expected a size of at least 1K");
			*(c == OPT_OUTPUT ? &cfg->max_output : &cfg->max_body) =
			    v;
			break;
		case OPT_UIDBASE:
			v = strtoull(optarg, &end, 10);
			if (*end || v < 65536 || v > 0xfffffffeull - (1u << 20))
				return bad("--uid-base", optarg,
				           "expected a number from 65536 to "
				           "4293918718");
			cfg->uid_base = (uint32_t)v;
			cfg->uid_base_given = true;
			break;
		case OPT_LOG:
			if (!strcmp(optarg, "debug"))
				cfg->log_level = LOG_DEBUG;
			else if (!strcmp(optarg, "info"))
				cfg->log_level = LOG_INFO;
			else if (!strcmp(optarg, "warn"))
				cfg->log_level = LOG_WARN;
			else if (!strcmp(optarg, "error"))
				cfg->log_level = LOG_ERROR;
			else
				return bad(
				    "--log-level", optarg,
				    "expected debug, info, warn or error");
			break;
		case OPT_DISK:
		case OPT_STORE:
			if (parse_size(optarg, &v) || (v && v < (64u << 20)))
				return bad(
				    c == OPT_DISK ? "--disk" : "--store-size",
				    optarg,
				    "expected 0 or a size of at least 64M");
			*(c == OPT_DISK ? &cfg->disk_bytes
			                : &cfg->store_bytes) = v;
			if (c == OPT_DISK)
				cfg->given |= CFG_DISK;
			break;
		case OPT_TENANT_DISK:
			if (parse_size(optarg, &v) || (v && v < (64u << 20)))
				return bad(
				    "--tenant-disk", optarg,
				    "expected 0 or a size of at least 64M");
			cfg->tenant_disk_bytes = v;
			break;
		case OPT_BACKUP_DIR:
			if (optarg[0] != '/')
				return bad("--backup-dir", optarg,
				           "expected an absolute path");
			cfg->backup_dir = optarg;
			break;
		case OPT_BACKUP_S3:
			if (strncmp(optarg, "s3://", 5) || !optarg[5] ||
			    optarg[5] == '/')
				return bad("--backup-s3", optarg,
				           "expected s3://BUCKET[/PREFIX]");
			cfg->backup_s3 = optarg;
			break;
		case OPT_S3_ENDPOINT:
			if (strncmp(optarg, "http://", 7) &&
			    strncmp(optarg, "https://", 8))
				return bad("--s3-endpoint", optarg,
				           "expected http://HOST[:PORT] or "
				           "https://...");
			cfg->s3_endpoint = optarg;
			break;
		case OPT_S3_REGION:
			if (!optarg[0] || strlen(optarg) > 64)
				return bad("--s3-region", optarg,
				           "expected a region");
			cfg->s3_region = optarg;
			break;
		case OPT_S3_CREDS:
			cfg->s3_credentials_file = optarg;
			break;
		case OPT_LLM_URL:
			if (strncmp(optarg, "http://", 7) &&
			    strncmp(optarg, "https://", 8))
				return bad("--llm-url", optarg,
				           "expected http://HOST[:PORT]/... or "
				           "https://...");
			cfg->llm_url = optarg;
			break;
		case OPT_LLM_MODEL:
			if (!optarg[0] || strlen(optarg) > 256)
				return bad("--llm-model", optarg,
				           "expected a model name");
			cfg->llm_model = optarg;
			break;
		case OPT_LLM_KEY:
			cfg->llm_key_file = optarg;
			break;
		case OPT_ETCD:
		case OPT_ADVERTISE:
			if ((strncmp(optarg, "http://", 7) &&
			     strncmp(optarg, "https://", 8)) ||
			    strlen(optarg) > 200 ||
			    strpbrk(optarg, " \r\n\"?#"))
				return bad(
				    c == OPT_ETCD ? "--etcd"
				                  : "--advertise-url",
				    optarg,
				    "expected http://HOST:PORT or https://...");
			if (c == OPT_ETCD)
				cfg->etcd_url = optarg;
			else
				cfg->advertise_url = optarg;
			break;
		case OPT_NODE_NAME:
			if (!optarg[0] || strlen(optarg) > 63 ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyz"
			                   "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			                   "0123456789.:_-") != strlen(optarg))
				return bad("--node-name", optarg,
				           "expected 1-63 of [A-Za-z0-9.:_-]");
			cfg->node_name = optarg;
			break;
		case OPT_ETCD_TTL:
			if (parse_duration_ms(optarg, &v) || v < 2000 ||
			    v > 3600 * 1000)
				return bad("--etcd-ttl", optarg,
				           "expected a duration of 2s to 1h");
			cfg->etcd_ttl_s = (v + 999) / 1000;
			break;
		case OPT_CHECKPOINT:
			if (parse_duration_ms(optarg, &v) || v < 1000)
				return bad("--checkpoint-every", optarg,
				           "expected a duration of 1s or more");
			cfg->checkpoint_every_ms = v;
			break;
		case OPT_LLM_TIMEOUT:
			if (parse_duration_ms(optarg, &v) || !v)
				return bad("--llm-timeout", optarg,
				           "expected a duration above 0");
			cfg->llm_timeout_ms = v;
			break;
		case OPT_S3_ADDRESSING:
			if (!strcmp(optarg, "auto"))
				cfg->s3_addressing = CONFIG_S3_AUTO;
			else if (!strcmp(optarg, "path"))
				cfg->s3_addressing = CONFIG_S3_PATH;
			else if (!strcmp(optarg, "virtual"))
				cfg->s3_addressing = CONFIG_S3_VIRTUAL;
			else
				return bad("--s3-addressing", optarg,
				           "expected path, virtual or auto");
			break;
		case OPT_PTYS:
			v = strtoull(optarg, &end, 10);
			if (*end || !optarg[0] || v < 1 || v > 4096)
				return bad("--max-ptys", optarg,
				           "expected a number from 1 to 4096");
			cfg->max_ptys = (unsigned)v;
			break;
		case OPT_TOKENS:
			cfg->tokens_path = optarg;
			break;
		case OPT_PROCLOGS:
		case OPT_SESSENV:
			if (parse_size(optarg, &v) || v < 1024 ||
			    v > (1ull << 40))
				return bad(
				    c == OPT_PROCLOGS ? "--max-process-logs"
				                      : "--max-session-env",
				    optarg, "expected a size of at least 1K");
			*(c == OPT_PROCLOGS ? &cfg->max_process_logs
			                    : &cfg->max_session_env) = v;
			break;
		case OPT_FILETIMEOUT:
			/* above the builtins' 1 s heartbeat, with room */
			if (parse_duration_ms(optarg, &v) || v < 2000)
				return bad(
				    "--file-timeout", optarg,
				    "expected a duration of at least 2s");
			cfg->file_timeout_ms = v;
			break;
		case OPT_CONFIG:
			break; /* read before the flags */
		case OPT_NETDEFAULT: {
			enum net_mode nm;
			if (net_mode_parse(optarg, &nm))
				return bad("--network-default", optarg,
				           "expected none, allowlist or full");
			cfg->network_default = (int)nm;
			break;
		}
		case OPT_DNS:
			if (parse_dns(cfg, optarg))
				return bad("--dns", optarg,
				           "expected IPv4 ADDR[:PORT], comma "
				           "separated, at most 4");
			break;
		case OPT_DENY:
			if (parse_deny(cfg, optarg))
				return bad(
				    "--deny-cidr", optarg,
				    "expected IPv4 ranges like 10.0.0.0/8, "
				    "comma separated, or none");
			break;
		case OPT_NETPOOL:
			if (net_cidr_parse(optarg, &cfg->net_pool) ||
			    cfg->net_pool.prefix > 28 ||
			    cfg->net_pool.prefix < 8 || cfg->net_pool.port)
				return bad(
				    "--net-pool", optarg,
				    "expected an IPv4 range from /8 to /28");
			break;
		case OPT_PREVIEW:
			if (!optarg[0] || strlen(optarg) > 200 ||
			    optarg[0] == '.')
				return bad("--preview-domain", optarg,
				           "expected a domain name");
			cfg->preview_domain = optarg;
			break;
		case OPT_HELP:
			fputs(usage, stdout);
			return 1;
		default:
			fputs(usage, stderr);
			return -1;
		}
	}
	if (optind < argc)
		return bad("argument", argv[optind], "unexpected");
	if (cfg->etcd_url && !cfg->advertise_url)
		return bad("--etcd", cfg->etcd_url,
		           "a node of a fleet needs --advertise-url");
	if (cfg->backup_s3 && cfg->backup_dir)
		return bad("--backup-dir", cfg->backup_dir,
		           "not with --backup-s3 (backups go to one store)");
	return 0;
}

void config_machine(struct machine *mc, const char *sandboxes_dir)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	cpu_set_t set;
	struct statvfs sv;
	char buf[32];
	memset(mc, 0, sizeof(*mc));
	if (pages > 0 && psz > 0)
		mc->ram_bytes = (uint64_t)pages * (uint64_t)psz;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		mc->ncpus = (uint32_t)CPU_COUNT(&set);
	if (!mc->ncpus) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		mc->ncpus = n > 0 ? (uint32_t)n : 1;
	}
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
	if (f) {
		if (fgets(buf, sizeof(buf), f))
			mc->pid_max = strtoull(buf, NULL, 10);
		fclose(f);
	}
	if (!mc->pid_max)
		mc->pid_max = 32768; /* the kernel's own default */
	if (sandboxes_dir && statvfs(sandboxes_dir, &sv) == 0)
		mc->disk_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* One per-sandbox default against its ceiling (see config_resolve). */
static int resolve_one(struct config *cfg, uint64_t *def, unsigned def_flag,
                       uint64_t *ceil, unsigned ceil_flag, uint64_t derived,
                       const char *def_name, const char *ceil_name,
                       struct sbx_err *err)
{
	if (!(cfg->given & ceil_flag)) {
		*ceil = max_u64(derived, *def);
		return 0;
	}
	if (!*def || *def <= *ceil)
		return 0;
	if (cfg->given & def_flag) {
		return sbx_err_set(err, EINVAL,
		                   "%s is above %s: a sandbox's default limit "
		                   "cannot exceed the ceiling",
		                   def_name, ceil_name);
	}
	*def = *ceil;
	return 0;
}

int config_resolve(struct config *cfg, const struct machine *mc,
                   struct sbx_err *err)
{
	uint64_t mem = cfg->limits.memory_bytes,
	         cmem = cfg->max_limits.memory_bytes;
	uint64_t pids = cfg->limits.pids, cpids = cfg->max_limits.pids;
	uint64_t cpu = cfg->limits.cpu_millis,
	         ccpu = cfg->max_limits.cpu_millis;
	uint64_t pid_max = mc->pid_max ? mc->pid_max : 32768;
	uint64_t ram = mc->ram_bytes ? mc->ram_bytes : 1ull << 30;
	if (resolve_one(cfg, &mem, CFG_MEMORY, &cmem, CFG_MAX_MEMORY, ram,
	                "--memory", "--max-memory", err) ||
	    resolve_one(cfg, &pids, CFG_PIDS, &cpids, CFG_MAX_PIDS,
	                max_u64(pid_max / 8, 8), "--pids", "--max-pids", err) ||
	    resolve_one(cfg, &cpu, CFG_CPUS, &ccpu, CFG_MAX_CPUS,
	                (uint64_t)(mc->ncpus ? mc->ncpus : 1) * 1000, "--cpus",
	                "--max-cpus", err) ||
	    resolve_one(cfg, &cfg->disk_bytes, CFG_DISK, &cfg->max_disk,
	                CFG_MAX_DISK, mc->disk_bytes, "--disk", "--max-disk",
	                err))
		return -EINVAL;
	cfg->limits.memory_bytes = mem;
	cfg->max_limits.memory_bytes = cmem;
	cfg->limits.pids = (uint32_t)pids;
	cfg->max_limits.pids = (uint32_t)(cpids > 4194304 ? 4194304 : cpids);
	cfg->limits.cpu_millis = (uint32_t)cpu;
	cfg->max_limits.cpu_millis = (uint32_t)ccpu;
	if (!(cfg->given & CFG_TOTAL_MEMORY))
		cfg->total_memory = ram / 4 * 3;
	if (!(cfg->given & CFG_TOTAL_PIDS))
		cfg->total_pids = pid_max / 2;
	if (!(cfg->given & CFG_MAX_SANDBOXES)) {
		/* every running sandbox at its default pids limit fits in the
		 * total (half of pid_max by default), and each has 128M of
		 * the machine's memory */
		uint64_t by_pids =
		    (cfg->total_pids ? cfg->total_pids : pid_max / 2) /
		    (cfg->limits.pids ? cfg->limits.pids : 1);
		uint64_t by_ram = ram / (128ull << 20);
		uint64_t n = by_pids < by_ram ? by_pids : by_ram;
		cfg->max_sandboxes = (uint32_t)(n < 1       ? 1
		                                : n > 65536 ? 65536
		                                            : n);
	}
	return 0;
}
