/* sbx: what the command files share (sbx.c holds main and the small
 * commands, cp.c copies, sh.c is the terminal, snap.c snapshots, backups
 * and images, opts.c parses every command's options). */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* Prints the command's help on stderr and returns EXIT_USAGE. */
int cli_usage(const char *help);
/* Writes all of data to fd (EINTR retried); -1 on an error. */
int cli_write_all(int fd, const void *data, size_t len);

/* Every value of a repeatable option, in order: v is NULL-terminated, or
 * NULL when the option was not given (free v). */
struct cli_list {
	const char **v;
	size_t n;
};

/* One option of a command, for cli_args: --name (NULL: none) and/or -letter
 * (0: none), and where its value goes. */
struct cli_opt {
	const char *name;
	char letter;
	enum {
		CLI_FLAG,   /* to.flag: set true */
		CLI_STR,    /* to.str: the value */
		CLI_NUM,    /* to.num: a whole number, else a usage error */
		CLI_LIST,   /* to.list: appended to (repeatable) */
		CLI_IGNORED /* accepted, no value, nothing stored */
	} kind;
	union {
		bool *flag;
		const char **str;
		uint64_t *num;
		struct cli_list *list;
	} to;
};

/* Operand counts for cli_args' max: any number; any number, options ending
 * at the first operand (what follows is a command's own argv). */
enum { CLI_ANY = -1, CLI_REST = -2 };
/* cli_args' answer when the command goes on. */
enum { CLI_GO_ON = -1 };

/* Parses a command's options by opts (ended by an entry without name and
 * letter; --help and -h are every command's) and checks that min to max
 * operands follow. CLI_GO_ON with optind at the first operand; else the
 * status to exit with: 0 after --help (the help on stdout), EXIT_USAGE for
 * a wrong option, a bad number or a wrong operand count (lists are then
 * freed). */
int cli_args(int argc, char **argv, const char *help,
             const struct cli_opt *opts, int min, int max);

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
