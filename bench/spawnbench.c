/* spawnbench: time N runs of a command, each a fork + execve + waitpid
 * from this process, with clock_gettime(CLOCK_MONOTONIC) around the three.
 * With "/bin/true" as the command this is the floor every sandbox runtime is
 * compared against (DESIGN.md: "fork+exec of /bin/true 0.86 ms"); with
 * "bwrap ... true" or "crun run ..." it times those tools the same way, so
 * every baseline pays the same harness cost.
 *
 * Usage: spawnbench [-n N] [-w WARMUP] [-l LABEL] -- CMD [ARG...]
 * The child's stdout goes to /dev/null; stderr is inherited, so a failing
 * tool says why. Prints one JSON object on stdout:
 *   {"label": L, "n": N, "failed": F, "first_status": S, "us": [..]}
 * where "us" holds every successful run's latency in microseconds. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One fork+exec+wait; returns the wait status or -1. */
static int run_once(char **argv, int devnull)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(devnull, 1);
		execve(argv[0], argv, environ);
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

int main(int argc, char **argv)
{
	long n = 1000, warm = 10;
	const char *label = "spawn";
	int opt;
	while ((opt = getopt(argc, argv, "+n:w:l:")) != -1) {
		switch (opt) {
		case 'n': n = atol(optarg); break;
		case 'w': warm = atol(optarg); break;
		case 'l': label = optarg; break;
		default:
			fprintf(stderr, "usage: spawnbench [-n N] [-w W] [-l LABEL] -- CMD [ARG...]\n");
			return 2;
		}
	}
	if (optind >= argc || n <= 0) {
		fprintf(stderr, "spawnbench: no command\n");
		return 2;
	}
	char **cmd = argv + optind;
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	double *us = calloc((size_t)n, sizeof(double));
	if (devnull < 0 || !us)
		return 1;
	long failed = 0, ok = 0;
	int first_status = 0;
	for (long i = 0; i < warm; i++)
		run_once(cmd, devnull);
	for (long i = 0; i < n; i++) {
		double t0 = now_us();
		int st = run_once(cmd, devnull);
		double t1 = now_us();
		if (st != 0) {
			if (!failed)
				first_status = st;
			failed++;
			continue;
		}
		us[ok++] = t1 - t0;
	}
	printf("{\"label\": \"%s\", \"n\": %ld, \"failed\": %ld, "
	       "\"first_status\": %d, \"us\": [",
	       label, n, failed, first_status);
	for (long i = 0; i < ok; i++)
		printf("%s%.1f", i ? "," : "", us[i]);
	printf("]}\n");
	return failed == n ? 1 : 0;
}
