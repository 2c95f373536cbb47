/* sbx snapshot|fork|restore|backup|image: the daemon's snapshots, backups
 * and images (shared/spec/v1.md "Snapshots and fork", "Backups",
 * "Images"), through
 * sbx_request: JSON in, JSON out, the same errors as every command. */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sbx.h"

const char help_snapshot[] =
    "Usage: sbx snapshot create [--name NAME] [--json] ID\n"
    "       sbx snapshot ls [--sandbox ID] [--json]\n"
    "       sbx snapshot info [--json] SNAP\n"
    "       sbx snapshot rm SNAP...\n"
    "\n"
    "Snapshots of a sandbox's whole writable filesystem, taken\n"
    "consistently and kept on the daemon's store. `create` prints the\n"
    "snapshot's ID (snap_...). Start a sandbox from one with\n"
    "`sbx create --from-snapshot SNAP`, or put a sandbox back with\n"
    "`sbx restore ID SNAP`.\n";

const char help_fork[] =
    "Usage: sbx fork [--json] ID [NEWID]\n"
    "\n"
    "Makes a new sandbox (NEWID, or one made up) whose files start as\n"
    "ID's are now, and prints its ID. The two then diverge.\n";

const char help_restore[] =
    "Usage: sbx restore [--dir DIR] ID SNAP|BACKUP\n"
    "\n"
    "Puts a sandbox's files back: a snapshot (snap_...) replaces its whole\n"
    "filesystem, a backup (bkp_...) the directory it was made of (or DIR).\n"
    "Its running processes end.\n";

const char help_backup[] =
    "Usage: sbx backup create [--dir DIR] [--exclude GLOB]... [--ttl SEC]\n"
    "                         [--json] ID\n"
    "       sbx backup ls [--json]\n"
    "       sbx backup info [--json] BACKUP\n"
    "       sbx backup rm BACKUP...\n"
    "\n"
    "Backups: an archive of one directory (default /workspace) kept in the\n"
    "daemon's backup store, which outlives the sandbox. `create` prints\n"
    "the backup's ID (bkp_...); `sbx restore ID BACKUP` puts it back, in\n"
    "any sandbox.\n";

const char help_image[] =
    "Usage: sbx image import [--json] NAME SOURCE\n"
    "       sbx image ls [--json]\n"
    "       sbx image info [--json] NAME\n"
    "       sbx image rm NAME...\n"
    "\n"
    "OCI images sandboxes can run instead of the host's system\n"
    "(`sbx create --image NAME`). SOURCE is a path on the daemon's\n"
    "machine: oci-layout:DIR[:TAG], oci-archive:FILE[:TAG],\n"
    "docker-archive:FILE[:TAG] or dir:DIR. Importing and removing need\n"
    "an operator's token.\n";

/* One JSON request; *out (may be NULL) the parsed answer. */
static int api(struct sbx_client *c, const char *method, const char *path,
               json_t *body, json_t **out, const char *what)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL, *ans = NULL;
	struct sbx_error err;
	json_decref(body);
	int rc = sbx_request(c, method, path, text, NULL, &ans, NULL, &err);
	free(text);
	if (rc)
		return cli_fail(what, &err);
	if (out) {
		*out = json_loads(ans, 0, NULL);
		if (!*out) {
			free(ans);
			return cli_say(EXIT_FAIL, "%s: the answer is not JSON",
			               what);
		}
	}
	free(ans);
	return 0;
}

static char *path_of(const char *fmt, const char *a)
{
	char *p = NULL;
	for (const char *q = a; *q; q++)
		if (*q == '/' || *q == '?' || *q == '#' || *q == '%' ||
		    *q == ' ')
			return NULL; /* IDs never hold these */
	if (asprintf(&p, fmt, a) < 0)
		return NULL;
	return p;
}

static void print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	printf("%s\n", s ? s : "null");
	free(s);
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s && *s ? s : "-";
}

static void size_h(json_t *o, const char *k, char *buf, size_t n)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_integer(v)) {
		snprintf(buf, n, "-");
		return;
	}
	double b = (double)json_integer_value(v);
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;
	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

struct sub {
	bool json;
	const char *name, *sandbox, *dir;
	uint64_t ttl;
	struct cli_list excludes;
};

/* the options, which every subcommand accepts, and min to max operands
 * (cli_args) */
static int sub_opts(int argc, char **argv, const char *help, struct sub *o,
                    int min, int max)
{
	const struct cli_opt opts[] = {
	    {"json", 0, CLI_FLAG, {.flag = &o->json}},
	    {"name", 0, CLI_STR, {.str = &o->name}},
	    {"sandbox", 0, CLI_STR, {.str = &o->sandbox}},
	    {"dir", 0, CLI_STR, {.str = &o->dir}},
	    {"exclude", 0, CLI_LIST, {.list = &o->excludes}},
	    {"ttl", 0, CLI_NUM, {.num = &o->ttl}},
	    {0},
	};
	return cli_args(argc, argv, help, opts, min, max);
}

static int print_id(json_t *ans, bool json)
{
	if (json)
		print_json(ans);
	else
		printf("%s\n", str(ans, "id"));
	json_decref(ans);
	return 0;
}

/* A column of a listing: its header, the key of its value, its width
 * (negative: aligned left), at most max characters (0: no limit), and how
 * the value reads. */
struct column {
	const char *head, *key;
	int width, max;
	enum { COL_STR, COL_SIZE, COL_INT } kind;
};

static const struct column snapshot_cols[] = {
    {"ID", "id", -22, 0, COL_STR},
    {"SANDBOX", "sandboxId", -24, 0, COL_STR},
    {"NAME", "name", -20, 20, COL_STR},
    {"CREATED", "createdAt", -24, 0, COL_STR},
    {"SIZE", "sizeBytes", 10, 0, COL_SIZE},
    {0},
};
static const struct column backup_cols[] = {
    {"ID", "id", -22, 0, COL_STR},
    {"DIR", "dir", -20, 0, COL_STR},
    {"SIZE", "sizeBytes", 10, 0, COL_SIZE},
    {"CREATED", "createdAt", -24, 0, COL_STR},
    {"EXPIRES", "expiresAt", -24, 0, COL_STR},
    {0},
};
static const struct column image_cols[] = {
    {"NAME", "name", -24, 0, COL_STR},
    {"DIGEST", "digest", -20, 19, COL_STR},
    {"SIZE", "sizeBytes", 10, 0, COL_SIZE},
    {"SANDBOXES", "sandboxes", 9, 0, COL_INT},
    {0},
};

/* a header line, then a line for each object of arr */
static void print_table(json_t *arr, const struct column *cols)
{
	for (const struct column *k = cols; k->head; k++)
		printf("%s%*s", k == cols ? "" : " ", k->width, k->head);
	printf("\n");
	size_t i;
	json_t *row;
	json_array_foreach(arr, i, row)
	{
		for (const struct column *k = cols; k->head; k++) {
			char v[32];
			const char *s = v;
			if (k->kind == COL_SIZE)
				size_h(row, k->key, v, sizeof(v));
			else if (k->kind == COL_INT)
				snprintf(v, sizeof(v), "%d",
				         (int)json_integer_value(
				             json_object_get(row, k->key)));
			else
				s = str(row, k->key);
			printf("%s%*.*s", k == cols ? "" : " ", k->width,
			       k->max ? k->max : INT_MAX, s);
		}
		printf("\n");
	}
}

/* ls, info and rm of /v1/snapshot, /v1/backup and /v1/image */
static int listing(struct sbx_client *c, const char *kind, const char *what,
                   int argc, char **argv, const char *help)
{
	struct sub o = {0};
	bool ls = !strcmp(what, "ls");
	int rc = sub_opts(argc, argv, help, &o, ls ? 0 : 1, ls ? 0 : CLI_ANY);
	free(o.excludes.v);
	if (rc != CLI_GO_ON)
		return rc;
	char path[256];
	json_t *ans = NULL;
	if (ls) {
		char *id = o.sandbox ? path_of("%s", o.sandbox) : NULL;
		if (o.sandbox && !id)
			return cli_usage(help);
		free(id); /* a check that it can go in a query */
		snprintf(path, sizeof(path), "/v1/%s%s%s", kind,
		         o.sandbox ? "?sandbox=" : "",
		         o.sandbox ? o.sandbox : "");
		if (api(c, "GET", path, NULL, &ans, kind))
			return EXIT_FAIL;
		json_t *arr =
		    json_object_get(ans, !strcmp(kind, "snapshot") ? "snapshots"
		                         : !strcmp(kind, "image")  ? "images"
		                                                   : "backups");
		if (o.json)
			print_json(ans);
		else
			print_table(arr,
			            !strcmp(kind, "snapshot") ? snapshot_cols
			            : !strcmp(kind, "image")  ? image_cols
			                                      : backup_cols);
		json_decref(ans);
		return 0;
	}
	rc = 0;
	for (int i = optind; i < argc; i++) {
		char *p = path_of(!strcmp(kind, "snapshot") ? "/v1/snapshot/%s"
		                  : !strcmp(kind, "image")  ? "/v1/image/%s"
		                                            : "/v1/backup/%s",
		                  argv[i]);
		if (!p)
			return cli_say(EXIT_USAGE, "%s: not an ID", argv[i]);
		if (!strcmp(what, "info")) {
			if (api(c, "GET", p, NULL, &ans, argv[i]) == 0) {
				if (o.json)
					print_json(ans);
				else {
					const char *k;
					json_t *v;
					json_object_foreach(ans, k, v)
					{
						char *s =
						    json_is_string(v)
						        ? strdup(
						              json_string_value(
						                  v))
						        : json_dumps(
						              v,
						              JSON_ENCODE_ANY |
						                  JSON_COMPACT);
						printf("%-14s %s\n", k,
						       s ? s : "");
						free(s);
					}
				}
				json_decref(ans);
			} else {
				rc = EXIT_FAIL;
			}
		} else if (api(c, "DELETE", p, NULL, NULL, argv[i])) {
			rc = EXIT_FAIL;
		}
		free(p);
	}
	return rc;
}

/* POST body (consumed) to /v1/sandbox/ID/WHAT; with print, the answer's id
 * is printed (with json, the whole answer) */
static int sandbox_post(struct sbx_client *c, const char *id, const char *what,
                        json_t *body, bool print, bool json)
{
	char fmt[64];
	snprintf(fmt, sizeof(fmt), "/v1/sandbox/%%s/%s", what);
	char *p = path_of(fmt, id);
	if (!p) {
		json_decref(body);
		return cli_say(EXIT_USAGE, "%s: not a sandbox ID", id);
	}
	json_t *ans = NULL;
	int rc = api(c, "POST", p, body, print ? &ans : NULL, id);
	free(p);
	return rc || !print ? rc : print_id(ans, json);
}

/* `sbx KIND VERB ...` of snapshot, backup and image: ls, info and rm are
 * listing's; make ("create", "import") goes on (CLI_GO_ON) with its options
 * in *o and n operands after them (argv[1 + optind]...); else the status to
 * exit with. */
static int verb(struct sbx_client *c, int argc, char **argv, const char *kind,
                const char *make, int n, const char *help, struct sub *o)
{
	if (argc < 2)
		return cli_usage(help);
	const char *what = argv[1];
	if (!strcmp(what, "ls") || !strcmp(what, "info") || !strcmp(what, "rm"))
		return listing(c, kind, what, argc - 1, argv + 1, help);
	if (strcmp(what, make))
		return cli_usage(help);
	return sub_opts(argc - 1, argv + 1, help, o, n, n);
}

int cmd_snapshot(struct sbx_client *c, int argc, char **argv)
{
	struct sub o = {0};
	int rc =
	    verb(c, argc, argv, "snapshot", "create", 1, help_snapshot, &o);
	free(o.excludes.v);
	if (rc != CLI_GO_ON)
		return rc;
	json_t *body = json_object();
	if (o.name)
		json_object_set_new(body, "name", json_string(o.name));
	return sandbox_post(c, argv[1 + optind], "snapshot", body, true,
	                    o.json);
}

int cmd_fork(struct sbx_client *c, int argc, char **argv)
{
	struct sub o = {0};
	int rc = sub_opts(argc, argv, help_fork, &o, 1, 2);
	free(o.excludes.v);
	if (rc != CLI_GO_ON)
		return rc;
	json_t *body = json_object();
	if (optind + 1 < argc)
		json_object_set_new(body, "id", json_string(argv[optind + 1]));
	return sandbox_post(c, argv[optind], "fork", body, true, o.json);
}

int cmd_restore(struct sbx_client *c, int argc, char **argv)
{
	struct sub o = {0};
	int rc = sub_opts(argc, argv, help_restore, &o, 2, 2);
	free(o.excludes.v);
	if (rc != CLI_GO_ON)
		return rc;
	const char *id = argv[optind], *from = argv[optind + 1];
	bool snap = !strncmp(from, "snap_", 5);
	if (!snap && strncmp(from, "bkp_", 4))
		return cli_say(
		    EXIT_USAGE,
		    "restore: %s is neither a snapshot (snap_...) nor "
		    "a backup (bkp_...)",
		    from);
	json_t *body = json_object();
	json_object_set_new(body, snap ? "snapshot" : "backup",
	                    json_string(from));
	if (o.dir)
		json_object_set_new(body, "dir", json_string(o.dir));
	return sandbox_post(c, id, "restore", body, false, false);
}

int cmd_backup(struct sbx_client *c, int argc, char **argv)
{
	struct sub o = {0};
	int rc = verb(c, argc, argv, "backup", "create", 1, help_backup, &o);
	if (rc != CLI_GO_ON)
		return rc;
	json_t *body = json_object();
	if (o.dir)
		json_object_set_new(body, "dir", json_string(o.dir));
	if (o.excludes.v) {
		json_t *x = json_array();
		for (size_t i = 0; i < o.excludes.n; i++)
			json_array_append_new(x, json_string(o.excludes.v[i]));
		json_object_set_new(body, "excludes", x);
		free(o.excludes.v);
	}
	if (o.ttl)
		json_object_set_new(body, "ttlSeconds",
		                    json_integer((json_int_t)o.ttl));
	return sandbox_post(c, argv[1 + optind], "backup", body, true, o.json);
}

int cmd_image(struct sbx_client *c, int argc, char **argv)
{
	struct sub o = {0};
	int rc = verb(c, argc, argv, "image", "import", 2, help_image, &o);
	free(o.excludes.v);
	if (rc != CLI_GO_ON)
		return rc;
	const char *name = argv[1 + optind], *source = argv[2 + optind];
	json_t *ans = NULL;
	if (api(c, "POST", "/v1/image",
	        json_pack("{s:s, s:s}", "name", name, "source", source), &ans,
	        name))
		return EXIT_FAIL;
	if (o.json)
		print_json(ans);
	else
		printf("%s %s\n", str(ans, "name"), str(ans, "digest"));
	json_decref(ans);
	return 0;
}
