/* The shell text the Cloudflare face runs a command as: pure string
 * building, unit-tested in tests/unit/test_cf_shell.c. */
#include <string.h>

#include "api/cf/cf.h"

/* s as one single-quoted shell word. */
void cf_shell_quote(struct buf *b, const char *s)
{
	buf_append(b, "'", 1);
	for (const char *q; (q = strchr(s, '\'')); s = q + 1) {
		buf_append(b, s, (size_t)(q - s));
		buf_append(b, "'\\''", 4);
	}
	buf_printf(b, "%s'", s);
}

/* The command with its own cwd and env for it alone: set up, eval'd in
 * the session's shell, and undone by an EXIT trap (which runs however the
 * command ends, exit included) before the session hook saves the state.
 * Only helper variables that are not exported are made: they are never
 * saved. */
void cf_shell_wrap(struct buf *b, const char *command, const char *cwd,
                   char **env, size_t envc)
{
	buf_printf(
	    b,
	    "__sbx_cf_ret() { return \"$1\"; }\n"
	    "__sbx_cf_end() {\n"
	    "  local __sbx_cf_rc=$?\n"
	    "  set +eu\n"); /* the command's set -e must not cut this short */
	if (cwd)
		buf_printf(b,
		           "  builtin cd -- \"$__sbx_cf_prev\" 2>/dev/null\n");
	for (size_t i = 0; i < envc; i++) {
		int kl = (int)strcspn(env[i], "=");
		buf_printf(b,
		           "  if [[ -n $__sbx_cf_h%zu ]]; then export "
		           "%.*s=\"$__sbx_cf_p%zu\";"
		           " else unset %.*s; fi\n",
		           i, kl, env[i], i, kl, env[i]);
	}
	buf_printf(b, "  if declare -F __sbx_save >/dev/null && { : >&63; } "
	              "2>/dev/null; then\n"
	              "    __sbx_cf_ret \"$__sbx_cf_rc\"; __sbx_save\n"
	              "  fi\n"
	              "  return \"$__sbx_cf_rc\"\n"
	              "}\n"
	              "trap __sbx_cf_end EXIT\n");
	for (size_t i = 0; i < envc; i++) {
		int kl = (int)strcspn(env[i], "=");
		buf_printf(b,
		           "__sbx_cf_h%zu=${%.*s+x}; __sbx_cf_p%zu=${%.*s-}; "
		           "export %.*s=",
		           i, kl, env[i], i, kl, env[i], kl, env[i]);
		cf_shell_quote(b, env[i] + kl + 1);
		buf_printf(b, "\n");
	}
	if (cwd) {
		buf_printf(b, "__sbx_cf_prev=$PWD\nbuiltin cd -- ");
		cf_shell_quote(b, cwd);
		buf_printf(b,
		           " 2>/dev/null || { builtin printf 'Failed to change "
		           "directory to %%s\\n' ");
		cf_shell_quote(b, cwd);
		buf_printf(b, " >&2; exit 1; }\n");
	}
	buf_printf(b, "eval ");
	cf_shell_quote(b, command);
	buf_printf(b, "\n");
}
