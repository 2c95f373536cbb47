/* sbx: the option parser every command uses (cli_args in sbx.h). A
 * command describes its options as a table; this turns the table into
 * getopt_long's, stores each value where its entry points, and checks the
 * number of operands, so that --help, a wrong option, a bad number and a
 * wrong operand count read the same in every command. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sbx.h"

int cli_usage(const char *help)
{
	fputs(help, stderr);
	return EXIT_USAGE;
}

static bool takes_value(const struct cli_opt *o)
{
	return o->kind == CLI_STR || o->kind == CLI_NUM || o->kind == CLI_LIST;
}

static int bad_number(const struct cli_opt *o, const char *v)
{
	if (o->name)
		return cli_say(EXIT_USAGE,
		               "--%s: expected a number, not \"%s\"", o->name,
		               v);
	return cli_say(EXIT_USAGE, "-%c: expected a number, not \"%s\"",
	               o->letter, v);
}

/* 0, or the status to exit with */
static int store(const struct cli_opt *o, const char *v)
{
	switch (o->kind) {
	case CLI_FLAG:
		*o->to.flag = true;
		return 0;
	case CLI_STR:
		*o->to.str = v;
		return 0;
	case CLI_NUM: {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(v, &end, 10);
		if (errno || *end || !*v || v[0] == '-')
			return bad_number(o, v);
		*o->to.num = n;
		return 0;
	}
	case CLI_LIST: {
		struct cli_list *l = o->to.list;
		const char **a = realloc(l->v, (l->n + 2) * sizeof(*a));
		if (!a)
			return cli_say(EXIT_FAIL, "out of memory");
		a[l->n++] = v;
		a[l->n] = NULL;
		l->v = a;
		return 0;
	}
	case CLI_IGNORED:
		return 0;
	}
	return 0;
}

static void free_lists(const struct cli_opt *opts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (opts[i].kind == CLI_LIST) {
			free(opts[i].to.list->v);
			*opts[i].to.list = (struct cli_list){0};
		}
}

static int parse(int argc, char **argv, const char *help,
                 const struct cli_opt *opts, size_t n, int min, int max,
                 struct option *lo, char *so)
{
	size_t nl = 0, ns = 0;
	/* "+": options end at the first operand, so that a command's own
	 * flags are never taken for sbx's */
	if (max == CLI_REST)
		so[ns++] = '+';
	so[ns++] = 'h';
	for (size_t i = 0; i < n; i++) {
		bool arg = takes_value(&opts[i]);
		/* an option without a letter answers 256 + its index */
		int val = opts[i].letter ? opts[i].letter : 256 + (int)i;
		if (opts[i].name)
			lo[nl++] = (struct option){
			    opts[i].name, arg ? required_argument : no_argument,
			    NULL, val};
		if (opts[i].letter) {
			so[ns++] = opts[i].letter;
			if (arg)
				so[ns++] = ':';
		}
	}
	lo[nl] = (struct option){"help", no_argument, NULL, 'h'};
	so[ns] = '\0';

	int ch;
	while ((ch = getopt_long(argc, argv, so, lo, NULL)) != -1) {
		const struct cli_opt *o = NULL;
		if (ch == 'h') {
			fputs(help, stdout);
			return 0;
		}
		if (ch >= 256 && (size_t)(ch - 256) < n)
			o = &opts[ch - 256];
		for (size_t i = 0; !o && ch != '?' && ch != ':' && i < n; i++)
			if (opts[i].letter == ch)
				o = &opts[i];
		if (!o)
			return cli_usage(help); /* getopt said what was wrong */
		int rc = store(o, optarg);
		if (rc)
			return rc;
	}
	int left = argc - optind;
	if (left < min || (max >= 0 && left > max))
		return cli_usage(help);
	return CLI_GO_ON;
}

int cli_args(int argc, char **argv, const char *help,
             const struct cli_opt *opts, int min, int max)
{
	size_t n = 0;
	while (opts[n].name || opts[n].letter)
		n++;
	struct option *lo = calloc(n + 2, sizeof(*lo));
	char *so = malloc(2 * n + 3);
	int rc = lo && so ? parse(argc, argv, help, opts, n, min, max, lo, so)
	                  : cli_say(EXIT_FAIL, "out of memory");
	free(lo);
	free(so);
	if (rc != CLI_GO_ON)
		free_lists(opts, n);
	return rc;
}
