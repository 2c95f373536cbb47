/* spawnbench: time runs of a command, each a fork + execve + waitpid from
 * this process, with clock_gettime(CLOCK_MONOTONIC) around the three. With
 * "/bin/true" as the command this is the floor every sandbox runtime is
 * compared against (DESIGN.md: "fork+exec of /bin/true 0.86 ms"); with
 * "bwrap ... true" or "crun run ..." it times those tools the same way, so
 * every baseline pays the same harness cost.
 *
 * Usage: spawnbench [-n N] [-w WARMUP] [-d SECONDS] [-P K] [-l LABEL] -- CMD [ARG...]
 *   -n N   N timed runs, one after another (default 1000)
 *   -d S   instead: run for S seconds, and count completions per second
 *          (several spawnbench processes side by side measure throughput)
 *   -P K   burst: each of the N rounds forks K children at once and times
 *          until the last one has exited; "{i}" in an argument becomes a
 *          number unique to the child (crun needs a container ID per run)
 * The child's stdout goes to /dev/null; stderr is inherited, so a failing
 * tool says why. Prints one JSON object on stdout:
 *   {"label": L, "n": N, "failed": F, "first_status": S, "us": [..],
 *    "per_sec": [..]}
 * where "us" holds every successful run's (or round's) latency in us. */
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

static int devnull;

static pid_t start(char **argv)
{
	pid_t pid = fork();
	if (pid == 0) {
		dup2(devnull, 1);
		execve(argv[0], argv, environ);
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static int wait_for(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

/* argv with "{i}" replaced by the number i, in fresh strings */
static char **subst(char **argv, long i)
{
	int n = 0;
	while (argv[n])
		n++;
	char **out = calloc((size_t)n + 1, sizeof(char *));
	for (int k = 0; k < n; k++) {
		char *hit = strstr(argv[k], "{i}");
		if (!hit) {
			out[k] = argv[k];
			continue;
		}
		if (asprintf(&out[k], "%.*s%ld%s", (int)(hit - argv[k]), argv[k], i,
			     hit + 3) < 0)
			exit(1);
	}
	return out;
}

int main(int argc, char **argv)
{
	long n = 1000, warm = 10, burst = 0;
	double duration = 0;
	const char *label = "spawn";
	int opt;
	while ((opt = getopt(argc, argv, "+n:w:d:P:l:")) != -1) {
		switch (opt) {
		case 'n': n = atol(optarg); break;
		case 'w': warm = atol(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'P': burst = atol(optarg); break;
		case 'l': label = optarg; break;
		default:
			fprintf(stderr, "usage: spawnbench [-n N] [-w W] [-d S] [-P K] "
					"[-l LABEL] -- CMD [ARG...]\n");
			return 2;
		}
	}
	if (optind >= argc || n <= 0) {
		fprintf(stderr, "spawnbench: no command\n");
		return 2;
	}
	char **cmd = argv + optind;
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	long cap = duration > 0 ? 1 << 20 : n;
	double *us = calloc((size_t)cap, sizeof(double));
	long per_sec[3600] = {0};
	int nsec = duration > 0 ? (int)duration : 0;
	if (devnull < 0 || !us)
		return 1;
	long failed = 0, ok = 0, runs = 0;
	int first_status = 0;
	long seq = 0;
	for (long i = 0; i < warm && !burst; i++)
		wait_for(start(cmd));
	double t_begin = now_us();
	for (;;) {
		if (duration > 0) {
			if (now_us() - t_begin >= duration * 1e6 || runs >= cap)
				break;
		} else if (runs >= n) {
			break;
		}
		runs++;
		int st = 0;
		double t0 = now_us();
		if (burst) {
			pid_t *pids = calloc((size_t)burst, sizeof(pid_t));
			for (long k = 0; k < burst; k++) {
				char **a = subst(cmd, seq++);
				pids[k] = start(a);
			}
			for (long k = 0; k < burst; k++) {
				int s = pids[k] > 0 ? wait_for(pids[k]) : -1;
				if (s && !st)
					st = s;
			}
			free(pids);
		} else {
			char **a = subst(cmd, seq++);
			st = wait_for(start(a));
		}
		double t1 = now_us();
		if (st != 0) {
			if (!failed)
				first_status = st;
			failed++;
			continue;
		}
		us[ok++] = t1 - t0;
		int sec = (int)((t1 - t_begin) / 1e6);
		if (sec < nsec)
			per_sec[sec]++;
	}
	printf("{\"label\": \"%s\", \"n\": %ld, \"failed\": %ld, "
	       "\"first_status\": %d, \"burst\": %ld, \"elapsed_us\": %.1f, "
	       "\"per_sec\": [",
	       label, runs, failed, first_status, burst, now_us() - t_begin);
	for (int s = 0; s < nsec; s++)
		printf("%s%ld", s ? "," : "", per_sec[s]);
	printf("], \"us\": [");
	for (long i = 0; i < ok; i++)
		printf("%s%.1f", i ? "," : "", us[i]);
	printf("]}\n");
	return failed == runs ? 1 : 0;
}
