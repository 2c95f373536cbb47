/* sbx: what the command files share (sbx.c holds main and the small
 * commands, cp.c copies, sh.c is the terminal). */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <stdbool.h>

#include "client/libsbx.h"

/* Exit statuses of sbx itself (a command's own comes through exec). */
enum { EXIT_FAIL = 1, EXIT_USAGE = 2 };

extern const char *sbx_url;

/* Prints "sbx: <what>: <message> (<code>)" and returns EXIT_FAIL. */
int cli_fail(const char *what, const struct sbx_error *err);
/* Prints "sbx: <fmt>" and returns code. */
int cli_say(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The command's help when argv asks for it (-h, --help): prints, true. */
bool cli_help(int argc, char **argv, const char *text);

int cmd_cp(struct sbx_client *c, int argc, char **argv);
int cmd_sh(struct sbx_client *c, int argc, char **argv);
int cmd_snapshot(struct sbx_client *c, int argc, char **argv);
int cmd_fork(struct sbx_client *c, int argc, char **argv);
int cmd_restore(struct sbx_client *c, int argc, char **argv);
int cmd_backup(struct sbx_client *c, int argc, char **argv);
int cmd_image(struct sbx_client *c, int argc, char **argv);

extern const char help_cp[], help_sh[], help_snapshot[], help_fork[],
    help_restore[], help_backup[], help_image[];

#endif
