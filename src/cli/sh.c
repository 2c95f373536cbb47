/* sbx sh: an interactive terminal in a sandbox, over the PTY WebSocket.
 *
 * The local terminal is put in raw mode (every key goes to the sandbox's
 * shell, ^C included) and restored however sbx ends: normal exit, a
 * failure, or SIGTERM/SIGHUP. SIGWINCH is turned into a resize message
 * through a self-pipe, so the sandbox's terminal follows the window. When
 * stdin is not a terminal its bytes are sent as they are, and its end is
 * sent as ^D, so `echo 'echo hi' | sbx sh ID` works too. sbx exits with
 * the shell's exit code. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/sbx.h"

const char help_sh[] =
    "Usage: sbx sh [options] ID\n"
    "\n"
    "Opens an interactive shell in a sandbox, in a terminal that follows\n"
    "this one's size. The terminal is shared: others who open the same\n"
    "session's terminal see the same screen. sbx exits with the shell's\n"
    "exit status.\n"
    "\n"
    "  -s, --session SID  the session's terminal (default: the default)\n"
    "      --shell PATH   the shell to start (default: the daemon's)\n";

static struct termios saved;
static bool raw;
static int winch_pipe[2] = {-1, -1};

static void restore(void)
{
	if (raw) {
		tcsetattr(0, TCSADRAIN, &saved);
		raw = false;
	}
}

static void on_fatal(int sig)
{
	restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_winch(int sig)
{
	int e = errno;
	char b = 0;
	(void)sig;
	if (write(winch_pipe[1], &b, 1) < 0) {
		/* full: a resize is pending anyway */
	}
	errno = e;
}

static void window(unsigned *cols, unsigned *rows)
{
	struct winsize ws;
	if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	} else {
		*cols = 80;
		*rows = 24;
	}
}

static int to_stdout(void *ud, int stream, const void *data, size_t len)
{
	(void)ud;
	(void)stream;
	return cli_write_all(1, data, len);
}

int cmd_sh(struct sbx_client *c, int argc, char **argv)
{
	const char *session = NULL, *shell = NULL;
	const struct cli_opt opts[] = {
	    {"session", 's', CLI_STR, {.str = &session}},
	    {"shell", 0, CLI_STR, {.str = &shell}},
	    {0},
	};
	int rc = cli_args(argc, argv, help_sh, opts, 1, 1);
	if (rc != CLI_GO_ON)
		return rc;
	const char *id = argv[optind];
	bool tty = isatty(0);
	unsigned cols, rows;
	window(&cols, &rows);

	struct sbx_pty *p = NULL;
	struct sbx_error err;
	if (sbx_pty_open(c, id, session, shell, cols, rows, &p, &err))
		return cli_fail(id, &err);

	if (pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		sbx_pty_close(p);
		return cli_say(EXIT_FAIL, "pipe: %s", strerror(errno));
	}
	struct sigaction sa = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGWINCH, &sa, NULL);
	if (tty && tcgetattr(0, &saved) == 0) {
		struct termios t = saved;
		cfmakeraw(&t);
		atexit(restore);
		signal(SIGTERM, on_fatal);
		signal(SIGHUP, on_fatal);
		if (tcsetattr(0, TCSADRAIN, &t) == 0)
			raw = true;
	}

	int code = 0;
	rc = -1;
	bool in_open = true;
	while (rc < 0) {
		struct pollfd fds[3] = {
		    {.fd = sbx_pty_fd(p), .events = POLLIN},
		    {.fd = winch_pipe[0], .events = POLLIN},
		    {.fd = in_open ? 0 : -1, .events = POLLIN},
		};
		if (poll(fds, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			restore();
			rc = cli_say(EXIT_FAIL, "poll: %s", strerror(errno));
			break;
		}
		if (fds[1].revents & POLLIN) {
			char b[64];
			while (read(winch_pipe[0], b, sizeof(b)) > 0)
				;
			window(&cols, &rows);
			if (sbx_pty_resize(p, cols, rows, &err)) {
				restore();
				rc = cli_fail(id, &err);
				break;
			}
		}
		if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[4096];
			ssize_t n = read(0, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				/* the end of a piped stdin: ^D to the shell */
				in_open = false;
				n = tty ? 0 : 1;
				buf[0] = 4;
			}
			if (n > 0 && sbx_pty_write(p, buf, (size_t)n, &err)) {
				restore();
				rc = cli_fail(id, &err);
				break;
			}
		}
		if (fds[0].revents) {
			int r = sbx_pty_read(p, to_stdout, NULL, &code, &err);
			if (r == 1) {
				rc = code;
			} else if (r < 0) {
				restore();
				rc = cli_fail(id, &err);
			}
		}
	}
	restore();
	sbx_pty_close(p);
	close(winch_pipe[0]);
	close(winch_pipe[1]);
	return rc;
}
