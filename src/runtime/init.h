/* pid 1 of a sandbox: a small program of its own (build/sandboxd-init,
 * static: libc, and libarchive's tar and zstd parts for the backups'
 * builtins its forks run), embedded in the daemon and exec'd from a sealed
 * memfd once per daemon, as the zygote (zygote.h). Each sandbox's init is
 * a fork of the zygote, made with the sandbox's namespaces: nothing is
 * exec'd per sandbox. It builds the sandbox's filesystem, then becomes
 * the spawner (spawner.h), which serves PROTO_SPAWN/PROTO_SIGNAL requests
 * and reports every exit.
 *
 * How it starts (init_run): argv is INIT_NAME alone (the zygote's, so
 * /proc/1/cmdline), the environment is empty, and the only fds are 0-2,
 * the socket to the daemon at INIT_SOCK_FD and the sandbox's user
 * namespace at INIT_USERNS_FD. Its parameters are the first packet on the
 * socket (PROTO_INIT, proto.h), with at most one fd: the user namespace
 * that idmaps the sandbox's files when another range owns them on disk
 * (rootfs.h files_userns_fd). */
#ifndef SBX_INIT_H
#define SBX_INIT_H

#define INIT_NAME "sandboxd-init" /* argv[0], comm and /proc/1/cmdline */
/* its comm until its parameters come: an init made ahead of its start
 * (runtime_make_ahead) waits under this name, the others for a moment */
#define INIT_AHEAD_NAME "sandboxd-ahead"
#define INIT_SOCK_FD 3
#define INIT_USERNS_FD 4

#include <stdint.h>
#include <sys/types.h>

struct sbx_err;
/* In the init binary: be a sandbox's init, its fds in place. */
_Noreturn void init_run(void);
/* Report a failed start on sock (PROTO_FAILED) and exit. */
_Noreturn void init_failed(int sock, const struct sbx_err *err);
/* Send a struct proto_status packet (what: NULL or text, cut to fit);
 * exits when the daemon is gone (EPIPE). Init, the spawner and the zygote
 * answer with it. */
void init_send_status(int sock, uint32_t type, uint64_t id, pid_t pid,
                      int status, int err, const char *what);

/* the init binary, linked in by runtime/init_blob.S */
extern const char sbx_init_blob[];
extern const unsigned long sbx_init_blob_size;

#endif
