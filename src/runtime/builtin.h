/* File operations run inside a sandbox by the daemon's own code: a spawn
 * with SPAWN_BUILTIN goes through every step of sandboxing (cgroup, user
 * namespace, no capabilities, seccomp) and then, instead of exec, runs one
 * of these. So a path is only ever resolved by a process that sees the
 * sandbox's filesystem and nothing else, and no host binary is exec'd into
 * the sandbox.
 *
 * argv: {op, base, path, ...}: path is resolved beneath base (absolute,
 * inside the sandbox) with openat2(RESOLVE_BENEATH): "..", absolute links
 * and links that leave base are refused (EXDEV).
 *   read   base path           stdout: "F <size>\n" + bytes, or
 *                                      "D\n" + entries (see below)
 *   write  base path <length>  stdin -> a temp file in the same dir, renamed
 *                              over path once exactly <length> bytes came;
 *                              parents created; stdout "OK <size>\n"
 *   delete base path [-r]      stdout "OK\n"
 *   mkdir  base path [-p]      stdout "OK\n"
 *   stat   base path           stdout "S <type> <size> <mode> <mtime>\n"
 *   rename base from to        stdout "OK\n"
 * A directory entry is "<type> <size> <mode> <mtime_ms> <name>\0", type one
 * of f d l o. Errors: stdout "E <errno> <what>\n", exit status 1. */
#ifndef SBX_BUILTIN_H
#define SBX_BUILTIN_H

_Noreturn void builtin_run(int argc, const char *const *argv);

#endif
