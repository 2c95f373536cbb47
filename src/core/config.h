/* The daemon's configuration, from its command line. */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/cgroup.h"
#include "runtime/firewall.h"

struct config {
	char listen_addr[64];
	uint16_t port;
	const char *state_dir;
	uint64_t sleep_after_ms;
	uint64_t exec_timeout_ms;
	struct cgroup_limits limits; /* defaults for new sandboxes */
	uint64_t disk_bytes;         /* per sandbox; 0: no limit */
	uint64_t store_bytes;        /* the disk store; UINT64_MAX: auto */
	uint64_t tenant_disk_bytes;  /* a tenant's sandboxes and snapshots
	                                together; 0: no limit */
	uint64_t max_output;         /* per stream of one command; the
	                                ceiling of maxOutputBytes */
	uint64_t max_process_logs;   /* per sandbox: background logs kept */
	uint64_t max_session_env;    /* per sandbox: sessions' environments */
	uint64_t file_timeout_ms;    /* a file operation without progress */
	uint64_t max_body;           /* JSON request bodies */
	uint32_t uid_base;           /* first host uid of sandbox ranges */
	bool uid_base_given;         /* --uid-base was on the command line */
	unsigned max_ptys;           /* per sandbox */
	int log_level;
	const char *tokens_path; /* NULL: no auth, loopback only */
	/* Operator ceilings and quotas (shared/spec/v1.md): a client's limits
	 * above a ceiling are refused; what is not given on the command line
	 * is derived from the machine by config_resolve(). */
	struct cgroup_limits
	    max_limits;         /* ceilings of limits.memoryMB/pids/cpus */
	uint64_t max_disk;      /* ceiling of limits.diskMB */
	uint32_t max_sandboxes; /* running at once */
	uint64_t total_memory;  /* all sandboxes together; 0: none */
	uint64_t total_pids;    /* all sandboxes together; 0: none */
	unsigned given;         /* CFG_* of the flags given */
	/* backups: a local directory, or S3-compatible object storage */
	const char *backup_dir;  /* NULL: <state>/backups */
	const char *backup_s3;   /* "s3://bucket[/prefix]", or NULL */
	const char *s3_endpoint; /* NULL: AWS's, for the region */
	const char *s3_region;   /* NULL: $AWS_REGION, or us-east-1 */
	const char *s3_credentials_file;
	int s3_addressing; /* CONFIG_S3_* */
	/* Network (shared/spec/v1.md "Network") */
	int network_default; /* enum net_mode */
	struct {
		uint32_t addr;
		uint16_t port;
	} dns[4];                /* upstreams */
	unsigned ndns;           /* 0: from /etc/resolv.conf */
	struct fw_cidr deny[64]; /* --deny-cidr */
	unsigned ndeny;
	struct fw_cidr net_pool;    /* sandboxes' link addresses */
	const char *preview_domain; /* NULL: none */
	/* the room assistant's model (core/llm.h) */
	const char *llm_url; /* NULL: none (503) */
	const char *llm_model;
	const char *llm_key_file; /* NULL: no key */
	uint64_t llm_timeout_ms;
	/* a node of a fleet (core/fleet.h); etcd_url NULL: a single daemon */
	const char *etcd_url;
	const char *advertise_url;
	const char *node_name; /* NULL: the advertised host:port */
	uint64_t etcd_ttl_s;
	uint64_t checkpoint_every_ms;
};

enum {
	CFG_MEMORY = 1u << 0,
	CFG_PIDS = 1u << 1,
	CFG_CPUS = 1u << 2,
	CFG_DISK = 1u << 3,
	CFG_MAX_MEMORY = 1u << 4,
	CFG_MAX_PIDS = 1u << 5,
	CFG_MAX_CPUS = 1u << 6,
	CFG_MAX_DISK = 1u << 7,
	CFG_MAX_SANDBOXES = 1u << 8,
	CFG_TOTAL_MEMORY = 1u << 9,
	CFG_TOTAL_PIDS = 1u << 10,
};

/* What the ceilings' defaults are derived from. */
struct machine {
	uint64_t ram_bytes;  /* physical memory */
	uint32_t ncpus;      /* CPUs this process may run on */
	uint64_t pid_max;    /* kernel.pid_max */
	uint64_t disk_bytes; /* size of the filesystem holding the sandboxes */
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
/* This machine's figures; disk from the filesystem at sandboxes_dir. */
void config_machine(struct machine *mc, const char *sandboxes_dir);
/* Derive the ceilings and totals not given from mc (see the usage text),
 * lower a per-sandbox default that was not given to a ceiling that was,
 * and refuse (-EINVAL, err filled) a given default above a given ceiling. */
struct sbx_err;
int config_resolve(struct config *cfg, const struct machine *mc,
                   struct sbx_err *err);

#endif
