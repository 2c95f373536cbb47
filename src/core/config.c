#include "core/config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	"  --store-size SIZE        size of the btrfs store holding all sandboxes'\n"
	"                           files (default: 90%% of the state dir's free\n"
	"                           space when first made; 0: plain directories,\n"
	"                           no disk limits)\n"
	"  --tenant-disk SIZE       disk limit for all of one tenant's sandboxes\n"
	"                           and snapshots together, shared data counted\n"
	"                           once (btrfs store only; default 0: none)\n"
	"  --max-output SIZE        keep at most this much of each of a\n"
	"                           command's stdout and stderr; the rest is\n"
	"                           dropped and flagged (default 16M)\n"
	"  --max-body SIZE          largest JSON request body (default 1M)\n"
	"  --uid-base N             first host uid of the sandboxes' uid ranges;\n"
	"                           each sandbox owns 65536 uids from here, in\n"
	"                           ranges reserved host-wide (default 1879048192,\n"
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
	"  --s3-endpoint URL        the storage's URL (default: AWS S3 of the region)\n"
	"  --s3-region REGION       signing region (default: $AWS_REGION, else\n"
	"                           us-east-1)\n"
	"  --s3-credentials-file F  an AWS shared-credentials file ([default] or\n"
	"                           $AWS_PROFILE, aws_access_key_id and\n"
	"                           aws_secret_access_key); without it,\n"
	"                           $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY, else\n"
	"                           $AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials\n"
	"  --s3-addressing MODE     path (host/bucket/key), virtual\n"
	"                           (bucket.host/key) or auto (default: path for an\n"
	"                           IP address or localhost endpoint, else virtual)\n"
	"  --tokens FILE            bearer tokens, one \"<token> <tenant>\" per\n"
	"                           line; required to listen beyond loopback\n"
	"  --log-level LEVEL        debug, info, warn or error (default info)\n"
	"  --help                   this text\n"
	"\n"
	"DURATION: 500ms, 30s, 10m, 1h (a plain number is seconds).\n"
	"SIZE: 1048576, 64K, 256M, 1G.\n";

enum {
	OPT_LISTEN = 1, OPT_STATE, OPT_SLEEP, OPT_TIMEOUT, OPT_MEMORY,
	OPT_PIDS, OPT_CPUS, OPT_OUTPUT, OPT_BODY, OPT_UIDBASE, OPT_LOG,
	OPT_TOKENS, OPT_DISK, OPT_STORE, OPT_HELP, OPT_PTYS,
	OPT_TENANT_DISK, OPT_BACKUP_DIR, OPT_BACKUP_S3, OPT_S3_ENDPOINT,
	OPT_S3_REGION, OPT_S3_CREDS, OPT_S3_ADDRESSING,
};

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

int config_parse(struct config *cfg, int argc, char **argv)
{
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
		{"help", no_argument, NULL, OPT_HELP},
		{"max-ptys", required_argument, NULL, OPT_PTYS},
		{"tenant-disk", required_argument, NULL, OPT_TENANT_DISK},
		{"backup-dir", required_argument, NULL, OPT_BACKUP_DIR},
		{"backup-s3", required_argument, NULL, OPT_BACKUP_S3},
		{"s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT},
		{"s3-region", required_argument, NULL, OPT_S3_REGION},
		{"s3-credentials-file", required_argument, NULL, OPT_S3_CREDS},
		{"s3-addressing", required_argument, NULL, OPT_S3_ADDRESSING},
		{NULL, 0, NULL, 0},
	};
	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->listen_addr, "127.0.0.1");
	cfg->port = 8080;
	cfg->state_dir = "/var/lib/sandboxd";
	cfg->sleep_after_ms = 10 * 60 * 1000;
	cfg->exec_timeout_ms = 10 * 60 * 1000;
	cfg->limits = (struct cgroup_limits){
		.memory_bytes = 1ull << 30, .pids = 512, .cpu_millis = 1000};
	cfg->max_output = 16u << 20;
	cfg->disk_bytes = 10ull << 30;
	cfg->store_bytes = UINT64_MAX;
	cfg->max_body = 1u << 20;
	cfg->uid_base = CONFIG_UID_BASE_DEFAULT;
	cfg->max_ptys = CONFIG_MAX_PTYS_DEFAULT;
	cfg->log_level = LOG_INFO;

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
					   optarg, "expected a duration like 30s");
			*(c == OPT_SLEEP ? &cfg->sleep_after_ms
					 : &cfg->exec_timeout_ms) = v;
			break;
		case OPT_MEMORY:
			if (parse_size(optarg, &v) || v < (16u << 20))
				return bad("--memory", optarg,
					   "expected a size of at least 16M");
			cfg->limits.memory_bytes = v;
			break;
		case OPT_PIDS:
			v = strtoull(optarg, &end, 10);
			if (*end || v < 8 || v > 4194304)
				return bad("--pids", optarg,
					   "expected a number from 8 to 4194304");
			cfg->limits.pids = (uint32_t)v;
			break;
		case OPT_CPUS: {
			double d = strtod(optarg, &end);
			if (*end || !(d >= 0.01 && d <= 1024))
				return bad("--cpus", optarg,
					   "expected a number from 0.01 to 1024");
			cfg->limits.cpu_millis = (uint32_t)(d * 1000 + 0.5);
			break;
		}
		case OPT_OUTPUT:
		case OPT_BODY:
			if (parse_size(optarg, &v) || v < 1024 ||
			    v > (1ull << 40))
				return bad(c == OPT_OUTPUT ? "--max-output"
							   : "--max-body",
					   optarg, "expected a size of at least 1K");
			*(c == OPT_OUTPUT ? &cfg->max_output : &cfg->max_body) = v;
			break;
		case OPT_UIDBASE:
			v = strtoull(optarg, &end, 10);
			if (*end || v < 65536 || v > 0xfffffffeull - (1u << 20))
				return bad("--uid-base", optarg,
					   "expected a number from 65536 to 4293918718");
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
				return bad("--log-level", optarg,
					   "expected debug, info, warn or error");
			break;
		case OPT_DISK:
		case OPT_STORE:
			if (parse_size(optarg, &v) || (v && v < (64u << 20)))
				return bad(c == OPT_DISK ? "--disk" : "--store-size",
					   optarg, "expected 0 or a size of at least 64M");
			*(c == OPT_DISK ? &cfg->disk_bytes : &cfg->store_bytes) = v;
			break;
		case OPT_TENANT_DISK:
			if (parse_size(optarg, &v) || (v && v < (64u << 20)))
				return bad("--tenant-disk", optarg,
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
					   "expected http://HOST[:PORT] or https://...");
			cfg->s3_endpoint = optarg;
			break;
		case OPT_S3_REGION:
			if (!optarg[0] || strlen(optarg) > 64)
				return bad("--s3-region", optarg, "expected a region");
			cfg->s3_region = optarg;
			break;
		case OPT_S3_CREDS:
			cfg->s3_credentials_file = optarg;
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
	if (cfg->backup_s3 && cfg->backup_dir)
		return bad("--backup-dir", cfg->backup_dir,
			   "not with --backup-s3 (backups go to one store)");
	return 0;
}
