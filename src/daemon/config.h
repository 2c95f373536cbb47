/* The daemon's configuration, from its command line. */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

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
	uint64_t max_output;          /* per stream of one command; the
					 ceiling of maxOutputBytes */
	uint64_t max_process_logs;    /* per sandbox: background logs kept */
	uint64_t max_session_env;     /* per sandbox: sessions' environments */
	uint64_t file_timeout_ms;     /* a file operation without progress */
	uint64_t max_body;            /* JSON request bodies */
	uint32_t uid_base;            /* first host uid of sandbox ranges */
	int log_level;
	const char *tokens_path;       /* NULL: no auth, loopback only */
};

/* Fill cfg from argv; returns 0, 1 when --help was printed, -1 (with the
 * message printed) on a bad flag. */
int config_parse(struct config *cfg, int argc, char **argv);

#endif
