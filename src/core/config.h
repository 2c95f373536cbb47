/* The daemon's configuration, from its command line. */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/cgroup.h"

struct config {
	char listen_addr[64];
	uint16_t port;
	const char *state_dir;
	uint64_t sleep_after_ms;
	uint64_t exec_timeout_ms;
	struct cgroup_limits limits;  /* defaults for new sandboxes */
	uint64_t disk_bytes;          /* per sandbox; 0: no limit */
	uint64_t store_bytes;         /* the disk store; UINT64_MAX: auto */
	uint64_t tenant_disk_bytes;   /* a tenant's sandboxes and snapshots
					 together; 0: no limit */
	uint64_t max_output;          /* per stream of one command */
	uint64_t max_body;            /* JSON request bodies */
	uint32_t uid_base;            /* first host uid of sandbox ranges */
	bool uid_base_given;          /* --uid-base was on the command line */
	unsigned max_ptys;            /* per sandbox */
	int log_level;
	const char *tokens_path;       /* NULL: no auth, loopback only */
	/* backups: a local directory, or S3-compatible object storage */
	const char *backup_dir;        /* NULL: <state>/backups */
	const char *backup_s3;         /* "s3://bucket[/prefix]", or NULL */
	const char *s3_endpoint;       /* NULL: AWS's, for the region */
	const char *s3_region;         /* NULL: $AWS_REGION, or us-east-1 */
	const char *s3_credentials_file;
	int s3_addressing;             /* CONFIG_S3_* */
};

/* 0x70000000: above systemd-nspawn's and nsresourced's container ranges
 * (0x00080000..0x6FFFFFFF), below 2^31, which some tools read as a signed
 * number (docs/security.md A.9). */
#define CONFIG_UID_BASE_DEFAULT 1879048192u
/* ptys per sandbox: 48 sandboxes fill the 3072 of a default host */
#define CONFIG_MAX_PTYS_DEFAULT 64u

enum { CONFIG_S3_AUTO, CONFIG_S3_PATH, CONFIG_S3_VIRTUAL };

/* Fill cfg from argv; returns 0, 1 when --help was printed, -1 (with the
 * message printed) on a bad flag. */
int config_parse(struct config *cfg, int argc, char **argv);

#endif
