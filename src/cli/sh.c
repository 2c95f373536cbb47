/* sbx sh: an interactive terminal (placeholder until the pty client). */
#include <stdio.h>

#include "cli/sbx.h"

const char help_sh[] = "Usage: sbx sh ID\n";

int cmd_sh(struct sbx_client *c, int argc, char **argv)
{
	(void)c;
	(void)argc;
	(void)argv;
	return cli_say(EXIT_FAIL, "sh: not yet");
}
