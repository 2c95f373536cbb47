/* File operations run inside a sandbox by the daemon's own code: a spawn
 * with SPAWN_BUILTIN goes through every step of sandboxing (cgroup, user
 * namespace, no capabilities, seccomp) and then, instead of exec, runs one
 * of these. So a path is only ever resolved by a process that sees the
 * sandbox's filesystem and nothing else, and no host binary is exec'd into
 * the sandbox.
 *
 * argv: {op, base, path, ...}: path is resolved beneath base (absolute,
 * inside the sandbox) with openat2(RESOLVE_BENEATH): "..", absolute links
 * and links that leave base are refused (EXDEV). When base is "/" (the
 * sandbox's own root: the Cloudflare protocol, where the sandbox is the
 * boundary) it is RESOLVE_IN_ROOT instead: absolute links resolve from
 * that root, as they do for the sandbox's programs, and still never
 * leave it.
 *   read   base path           stdout: "F <size>\n" + bytes, or
 *                                      "D\n" + entries (see below)
 *   write  base path <length>  stdin -> a temp file in the same dir, renamed
 *                              over path once exactly <length> bytes came
 *                              ("-": at EOF; SIGTERM: cut short);
 *                              parents created; stdout "OK <size>\n"
 *   delete base path [-r] [-f] stdout "OK\n"; -f: files only (a
 *                              directory is EISDIR)
 *   mkdir  base path [-p]      stdout "OK\n"
 *   stat   base path           stdout "S <type> <size> <mode> <mtime>\n"
 *   rename base from to [-m]   stdout "OK\n"; -m: as mv, a directory `to`
 *                              receives `from` under its own name
 *   list   base path [-r] [-a] [-s]
 *                              stdout "D\n" + entries named by their path
 *                              relative to path; -r: whole tree (links not
 *                              followed), -a: names starting with ".",
 *                              -s: sorted by that path (byte order; held
 *                              in the builtin's memory, the sandbox's)
 *   tar    base path [--exclude=P]  stdout: a tar of base/path
 *   untar  base path           stdin: a tar, unpacked beneath base/path
 *                              (both in builtin_tar.c, errors on stderr)
 *   archive-create, archive-unpack, archive-commit, archive-abort
 *                              backups (builtin_archive.c)
 *   watch  base path [-r]      inotify events until killed
 *                              (builtin_watch.c)
 * A directory entry is "<type> <size> <mode> <mtime_ms> <name>\0", type one
 * of f d l o. Errors: stdout "E <errno> <what>\n", exit status 1.
 *
 * Every builtin writes a NUL byte to stderr each BUILTIN_HEARTBEAT_S
 * seconds while it runs (a timer signal), so that the daemon can tell one
 * that works long (a huge tree deleted or sorted) from one that was
 * stopped. It runs with only its stdio open (runtime/spawn.c). */
#ifndef SBX_BUILTIN_H
#define SBX_BUILTIN_H

#include <stdbool.h>

#define BUILTIN_HEARTBEAT_S 1
/* The size the daemon gives a builtin's stdout and stdin pipes: a file's
 * bytes go through them in steps of this (spliced out, read in) */
#define BUILTIN_PIPE_SZ (1 << 20)

_Noreturn void builtin_run(int argc, const char *const *argv);
/* tar / untar (argv as above), base an O_PATH fd of argv[1]. */
_Noreturn void builtin_tar(int base, int argc, const char *const *argv);
/* The archive-* operations (builtin_archive.c), base an O_PATH fd of
 * argv[1]. */
_Noreturn void builtin_archive(int base, int argc, const char *const *argv);

/* watch (argv as above), dfd the watched directory (taken); -r: rec. */
_Noreturn void builtin_watch(int dfd, bool rec);

#endif
