/* The image store (images.h).
 *
 * Theory of operation. images_import forks a child that does all the
 * blocking work: an archive (from a host path or the stream's pipe) is
 * unpacked as plain files into tmp/imp-<pid>/src (runtime/layer.c, which
 * never writes outside it); a layout directory is used in place. The
 * child reads index.json (OCI) or manifest.json (docker save), picks the
 * manifest (by tag, else the only one, else the host's platform), checks
 * each blob against its sha256 digest, unpacks each layer not already in
 * layers/ into tmp and renames it there (so a layer is whole or absent),
 * resolves the config's User against the image's /etc/passwd and
 * /etc/group, and writes meta/<hex>.json. It ends by writing the image's
 * hex digest, or "!" and an error, to its result pipe. On the loop, the
 * pipe's end loads the record and names the image (names/<name>). Every
 * file opened inside a layout or an archive is opened with
 * RESOLVE_IN_ROOT, so a symlink in it can only name its own files. */
#include "core/images.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "lib/log.h"
#include "lib/sha256.h"
#include "lib/util.h"
#include "runtime/fsutil.h"
#include "runtime/layer.h"

#define RESULT_MAX 1024
#define JSON_MAX (4u << 20)

struct image_import {
	struct images *im;
	char *name;
	pid_t pid;
	int res_fd; /* the child's result */
	int in_fd;  /* the stream's pipe, or -1 */
	struct loop_watch res_w, in_w;
	char res[RESULT_MAX];
	size_t nres;
	image_done_cb done;
	void *ctx;
	void (*on_drain)(void *ctx);
	struct image_import *next;
};

/* ---- helpers ---------------------------------------------------------- */

static int open_in_root(int root, const char *path, int flags)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
	                       .resolve =
	                           RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
}

static bool hex64(const char *s)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (!isxdigit((unsigned char)s[i]) ||
		    isupper((unsigned char)s[i]))
			return false;
	return i == SHA256_HEX_LEN;
}

/* "sha256:<hex>" -> hex, or NULL */
static const char *digest_hex(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) || !hex64(d + 7))
		return NULL;
	return d + 7;
}

bool image_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > IMAGE_NAME_MAX || name[0] == '.' || name[0] == '/' ||
	    strstr(name, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) &&
		    !strchr("._:@/-", name[i]))
			return false;
	return true;
}

/* names/<name> holds a name with '/' and ':' in it: encode them */
static void name_file(const char *name, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = name; *p && o + 4 < cap; p++) {
		if (*p == '/' || *p == ':' || *p == '%')
			o += (size_t)snprintf(out + o, cap - o, "%%%02X",
			                      (unsigned char)*p);
		else
			out[o++] = *p;
	}
	out[o] = '\0';
}

static void name_decode(const char *f, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = f; *p && o + 1 < cap; p++) {
		unsigned v;
		if (*p == '%' && sscanf(p + 1, "%2X", &v) == 1 && p[1] &&
		    p[2]) {
			out[o++] = (char)v;
			p += 2;
		} else
			out[o++] = *p;
	}
	out[o] = '\0';
}

static int hash_fd(int fd, char hex[SHA256_HEX_LEN + 1], uint64_t max,
                   struct sbx_err *err)
{
	struct sha256 s;
	char buf[1 << 16];
	uint64_t total = 0;
	sha256_init(&s);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_err_sys(err, errno, "read");
		if (n == 0)
			break;
		if ((total += (uint64_t)n) > max)
			return sbx_err_set(err, EFBIG, "a blob over %llu bytes",
			                   (unsigned long long)max);
		sha256_update(&s, buf, (size_t)n);
	}
	sha256_final_hex(&s, hex);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return sbx_err_sys(err, errno, "lseek");
	return 0;
}

static json_t *load_json_at(int root, const char *path, const char *want_hex,
                            struct sbx_err *err)
{
	_cleanup_close_ int fd = open_in_root(root, path, O_RDONLY);
	if (fd < 0) {
		sbx_err_sys(err, errno, "%s", path);
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > JSON_MAX) {
		sbx_err_set(err, EINVAL, "%s: not a small regular file", path);
		return NULL;
	}
	if (want_hex) {
		char hex[SHA256_HEX_LEN + 1];
		if (hash_fd(fd, hex, JSON_MAX, err) < 0)
			return NULL;
		if (strcmp(hex, want_hex)) {
			sbx_err_set(err, EINVAL,
			            "%s: its content does not match its digest",
			            path);
			return NULL;
		}
	}
	json_error_t je;
	json_t *j = json_loadfd(fd, 0, &je);
	if (!j)
		sbx_err_set(err, EINVAL, "%s: not JSON: %s", path, je.text);
	return j;
}

/* ---- the child -------------------------------------------------------- */

struct job {
	int store;       /* <state>/images */
	int root;        /* the layout (or the unpacked archive) */
	const char *tag; /* or NULL */
	char tmpname[64];
	/* what it finds */
	char digest_hex[SHA256_HEX_LEN + 1];
	json_t *config;
	char **layer_paths; /* inside root */
	char **layer_hex;   /* expected digests, or "" (docker: computed) */
	size_t nlayers;
	uint64_t bytes;
};

static const char *host_arch(void)
{
	struct utsname u;
	static char arch[32] = "amd64";
	if (uname(&u) == 0) {
		if (!strcmp(u.machine, "x86_64"))
			snprintf(arch, sizeof(arch), "amd64");
		else if (!strcmp(u.machine, "aarch64"))
			snprintf(arch, sizeof(arch), "arm64");
		else
			snprintf(arch, sizeof(arch), "%.31s", u.machine);
	}
	return arch;
}

static bool tag_matches(json_t *desc, const char *tag)
{
	json_t *ann = json_object_get(desc, "annotations");
	const char *ref = json_string_value(
	    json_object_get(ann, "org.opencontainers.image.ref.name"));
	const char *full =
	    json_string_value(json_object_get(ann, "io.containerd.image.name"));
	if (ref && !strcmp(ref, tag))
		return true;
	if (full) {
		size_t fl = strlen(full), tl = strlen(tag);
		if (!strcmp(full, tag) ||
		    (fl > tl && full[fl - tl - 1] == ':' &&
		     !strcmp(full + fl - tl, tag)))
			return true;
	}
	return false;
}

static bool is_index_type(const char *mt)
{
	return mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
	              !strcmp(mt, "application/vnd.docker.distribution."
	                          "manifest.list.v2+json"));
}

/* From an index: the descriptor of the manifest to use. */
static json_t *pick_manifest(json_t *index, const char *tag, bool top,
                             struct sbx_err *err)
{
	json_t *ms = json_object_get(index, "manifests");
	size_t n = json_array_size(ms);
	if (!n) {
		sbx_err_set(err, EINVAL, "index.json lists no manifest");
		return NULL;
	}
	if (top && tag) {
		for (size_t i = 0; i < n; i++)
			if (tag_matches(json_array_get(ms, i), tag))
				return json_array_get(ms, i);
		sbx_err_set(err, ENOENT, "no manifest is tagged %s", tag);
		return NULL;
	}
	if (n == 1)
		return json_array_get(ms, 0);
	const char *arch = host_arch();
	for (size_t i = 0; i < n; i++) {
		json_t *d = json_array_get(ms, i);
		json_t *pf = json_object_get(d, "platform");
		const char *os = json_string_value(json_object_get(pf, "os"));
		const char *a =
		    json_string_value(json_object_get(pf, "architecture"));
		if (os && a && !strcmp(os, "linux") && !strcmp(a, arch))
			return d;
	}
	sbx_err_set(err, EINVAL,
	            "%zu manifests and none for linux/%s: name one with :tag",
	            n, arch);
	return NULL;
}

static int blob_path(const char *digest, char *out, size_t cap,
                     struct sbx_err *err)
{
	const char *hex = digest_hex(digest);
	if (!hex)
		return sbx_err_set(err, EINVAL, "%.100s: not a sha256 digest",
		                   digest ? digest : "(none)");
	snprintf(out, cap, "blobs/sha256/%s", hex);
	return 0;
}

static int add_layer(struct job *j, const char *path, const char *hex)
{
	char **p = realloc(j->layer_paths, (j->nlayers + 1) * sizeof(char *));
	if (!p)
		return -ENOMEM;
	j->layer_paths = p;
	char **h = realloc(j->layer_hex, (j->nlayers + 1) * sizeof(char *));
	if (!h)
		return -ENOMEM;
	j->layer_hex = h;
	j->layer_paths[j->nlayers] = strdup(path);
	j->layer_hex[j->nlayers] = strdup(hex ? hex : "");
	j->nlayers++;
	return 0;
}

static int read_oci(struct job *j, struct sbx_err *err)
{
	json_t *index = load_json_at(j->root, "index.json", NULL, err);
	if (!index)
		return -EINVAL;
	json_t *desc = pick_manifest(index, j->tag, true, err);
	json_t *manifest = NULL;
	int r = -EINVAL;
	char path[256];
	for (int depth = 0; desc && depth < 4; depth++) {
		const char *d =
		    json_string_value(json_object_get(desc, "digest"));
		if (blob_path(d, path, sizeof(path), err))
			goto out;
		json_t *m = load_json_at(j->root, path, digest_hex(d), err);
		if (!m)
			goto out;
		json_decref(manifest);
		manifest = m;
		const char *mt =
		    json_string_value(json_object_get(m, "mediaType"));
		if (!is_index_type(mt) && !json_object_get(m, "manifests")) {
			snprintf(j->digest_hex, sizeof(j->digest_hex), "%s",
			         digest_hex(d));
			break;
		}
		desc = pick_manifest(m, NULL, false, err);
	}
	if (!manifest || !j->digest_hex[0]) {
		if (!err->code)
			sbx_err_set(err, EINVAL, "no image manifest found");
		goto out;
	}
	const char *cd = json_string_value(
	    json_object_get(json_object_get(manifest, "config"), "digest"));
	if (blob_path(cd, path, sizeof(path), err) ||
	    !(j->config = load_json_at(j->root, path, digest_hex(cd), err)))
		goto out;
	json_t *ls = json_object_get(manifest, "layers");
	size_t i;
	json_t *l;
	json_array_foreach(ls, i, l)
	{
		const char *ld =
		    json_string_value(json_object_get(l, "digest"));
		if (blob_path(ld, path, sizeof(path), err))
			goto out;
		if (add_layer(j, path, digest_hex(ld)) < 0) {
			r = sbx_err_set(err, ENOMEM, "out of memory");
			goto out;
		}
	}
	r = 0;
out:
	json_decref(manifest);
	json_decref(index);
	return r;
}

static int read_docker(struct job *j, struct sbx_err *err)
{
	json_t *mf = load_json_at(j->root, "manifest.json", NULL, err);
	if (!mf)
		return -EINVAL;
	int r = -EINVAL;
	_cleanup_close_ int cfd = -1;
	size_t n = json_array_size(mf), i;
	json_t *e = NULL, *x;
	if (j->tag) {
		json_array_foreach(mf, i, x)
		{
			json_t *tags = json_object_get(x, "RepoTags");
			size_t k;
			json_t *t;
			json_array_foreach(tags, k, t)
			{
				const char *s = json_string_value(t);
				size_t sl = s ? strlen(s) : 0,
				       tl = strlen(j->tag);
				if (s && (!strcmp(s, j->tag) ||
				          (sl > tl && s[sl - tl - 1] == ':' &&
				           !strcmp(s + sl - tl, j->tag))))
					e = x;
			}
		}
		if (!e) {
			sbx_err_set(err, ENOENT, "no image is tagged %s",
			            j->tag);
			goto out;
		}
	} else if (n == 1)
		e = json_array_get(mf, 0);
	else {
		sbx_err_set(err, EINVAL,
		            "manifest.json lists %zu images: name "
		            "one with :tag",
		            n);
		goto out;
	}
	const char *cfg = json_string_value(json_object_get(e, "Config"));
	if (!cfg) {
		sbx_err_set(err, EINVAL, "manifest.json: no Config");
		goto out;
	}
	cfd = open_in_root(j->root, cfg, O_RDONLY);
	if (cfd < 0 || hash_fd(cfd, j->digest_hex, JSON_MAX, err) < 0) {
		if (!err->code)
			sbx_err_sys(err, errno, "%s", cfg);
		goto out;
	}
	if (!(j->config = load_json_at(j->root, cfg, NULL, err)))
		goto out;
	json_array_foreach(json_object_get(e, "Layers"), i, x)
	{
		const char *p = json_string_value(x);
		if (!p) {
			sbx_err_set(err, EINVAL, "manifest.json: a bad layer");
			goto out;
		}
		/* blobs/sha256/<hex> (newer docker) names its digest */
		const char *h =
		    !strncmp(p, "blobs/sha256/", 13) && hex64(p + 13) ? p + 13
		                                                      : NULL;
		if (add_layer(j, p, h) < 0) {
			sbx_err_set(err, ENOMEM, "out of memory");
			goto out;
		}
	}
	r = 0;
out:
	json_decref(mf);
	return r;
}

static int layer_size_read(int layers, const char *hex, uint64_t *out)
{
	char name[96], buf[32];
	snprintf(name, sizeof(name), "%s.size", hex);
	if (fs_read_small(layers, name, buf, sizeof(buf)) <= 0)
		return -ENOENT;
	*out = strtoull(buf, NULL, 10);
	return 0;
}

/* One layer into layers/<hex>, unless it is there. */
static int unpack_layer(struct job *j, int layers, size_t i,
                        struct sbx_err *err)
{
	const char *path = j->layer_paths[i];
	_cleanup_close_ int fd = open_in_root(j->root, path, O_RDONLY);
	if (fd < 0)
		return sbx_err_sys(err, errno, "layer %s", path);
	char hex[SHA256_HEX_LEN + 1];
	int r;
	if ((r = hash_fd(fd, hex, IMAGE_MAX_BYTES, err)))
		return r;
	if (*j->layer_hex[i] && strcmp(hex, j->layer_hex[i]))
		return sbx_err_set(err, EINVAL,
		                   "layer %s: its content does not match its "
		                   "digest",
		                   path);
	free(j->layer_hex[i]);
	j->layer_hex[i] = strdup(hex);
	if (!j->layer_hex[i])
		return sbx_err_set(err, ENOMEM, "out of memory");
	uint64_t have;
	struct stat st;
	if (fstatat(layers, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    layer_size_read(layers, hex, &have) == 0) {
		j->bytes += have;
		return 0;
	}
	char tmp[128];
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", hex, (int)getpid());
	fs_remove_tree(layers, tmp, NULL);
	if (mkdirat(layers, tmp, 0755) < 0)
		return sbx_err_sys(err, errno, "mkdir layer");
	_cleanup_close_ int dfd = openat(
	    layers, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return sbx_err_sys(err, errno, "open layer");
	struct layer_limits lim = {
	    .max_bytes =
	        IMAGE_MAX_BYTES -
	        (j->bytes < IMAGE_MAX_BYTES ? j->bytes : IMAGE_MAX_BYTES),
	    .max_entries = IMAGE_MAX_ENTRIES};
	struct layer_stats ls;
	if ((r = layer_unpack(fd, dfd, LAYER_OCI, &lim, &ls, err))) {
		char msg[sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "layer %.16s: %.400s", hex,
		         err->msg);
		snprintf(err->msg, sizeof(err->msg), "%s", msg);
		fs_remove_tree(layers, tmp, NULL);
		return r;
	}
	j->bytes += ls.bytes;
	char sz[32];
	snprintf(sz, sizeof(sz), "%llu\n", (unsigned long long)ls.bytes);
	char szname[96];
	snprintf(szname, sizeof(szname), "%s.size", hex);
	if ((r = fs_write_str(layers, szname, sz, 0600, err)))
		return r;
	if (renameat(layers, tmp, layers, hex) < 0) {
		int e = errno;
		fs_remove_tree(layers, tmp, NULL);
		/* another import unpacked it meanwhile */
		if (e != EEXIST && e != ENOTEMPTY)
			return sbx_err_sys(err, e, "rename layer");
	}
	return 0;
}

/* An entry in the image's file tree, from the top layer down: its fd
 * (O_PATH when path_only), -ENOENT when absent or whited out. */
static int image_lookup(int layers, struct job *j, const char *path,
                        bool path_only)
{
	for (size_t i = j->nlayers; i-- > 0;) {
		_cleanup_close_ int l =
		    openat(layers, j->layer_hex[i],
		           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (l < 0)
			continue;
		int fd = open_in_root(
		    l, path, path_only ? (O_PATH | O_NOFOLLOW) : O_RDONLY);
		if (fd < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) &&
		    st.st_rdev == 0) {
			close(fd);
			return -ENOENT; /* whiteout */
		}
		return fd;
	}
	return -ENOENT;
}

/* name or number in a passwd/group file: field 2 (its id), and for
 * passwd field 3 (the primary group) in *gid. */
static int lookup_id(int fd, const char *name, unsigned *id, unsigned *gid)
{
	FILE *f = fdopen(fcntl(fd, F_DUPFD_CLOEXEC, 0), "r");
	if (!f)
		return -errno;
	char line[1024];
	int r = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *fields[4] = {0};
		char *p = line;
		for (int k = 0; k < 4; k++) {
			fields[k] = strsep(&p, ":");
			if (!fields[k])
				break;
		}
		(void)save;
		if (!fields[0] || !fields[2] || strcmp(fields[0], name))
			continue;
		*id = (unsigned)strtoul(fields[2], NULL, 10);
		if (gid && fields[3])
			*gid = (unsigned)strtoul(fields[3], NULL, 10);
		r = 0;
		break;
	}
	fclose(f);
	return r;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

static int resolve_user(int layers, struct job *j, const char *user,
                        unsigned *uid, unsigned *gid, struct sbx_err *err)
{
	char u[256], *g;
	snprintf(u, sizeof(u), "%s", user);
	g = strchr(u, ':');
	if (g)
		*g++ = '\0';
	*uid = *gid = 0;
	bool gid_set = false;
	if (all_digits(u)) {
		*uid = (unsigned)strtoul(u, NULL, 10);
		*gid = *uid;
		_cleanup_close_ int pw =
		    image_lookup(layers, j, "etc/passwd", false);
		if (pw >= 0) {
			/* the primary group of that uid, if listed */
			FILE *f = fdopen(fcntl(pw, F_DUPFD_CLOEXEC, 0), "r");
			char line[1024];
			while (f && fgets(line, sizeof(line), f)) {
				char *p = line, *fl[4] = {0};
				for (int k = 0;
				     k < 4 && (fl[k] = strsep(&p, ":")); k++)
					;
				if (fl[2] && fl[3] &&
				    strtoul(fl[2], NULL, 10) == *uid) {
					*gid =
					    (unsigned)strtoul(fl[3], NULL, 10);
					break;
				}
			}
			if (f)
				fclose(f);
		}
	} else {
		_cleanup_close_ int pw =
		    image_lookup(layers, j, "etc/passwd", false);
		if (pw < 0 || lookup_id(pw, u, uid, gid) < 0)
			return sbx_err_set(
			    err, ENOENT,
			    "config User %s: no such user in the "
			    "image's /etc/passwd",
			    user);
	}
	if (g && *g) {
		if (all_digits(g))
			*gid = (unsigned)strtoul(g, NULL, 10);
		else {
			_cleanup_close_ int gr =
			    image_lookup(layers, j, "etc/group", false);
			if (gr < 0 || lookup_id(gr, g, gid, NULL) < 0)
				return sbx_err_set(err, ENOENT,
				                   "config User %s: no such "
				                   "group in the image's "
				                   "/etc/group",
				                   user);
		}
		gid_set = true;
	}
	(void)gid_set;
	if (*uid > 65535 || *gid > 65535)
		return sbx_err_set(err, ERANGE,
		                   "config User %s: ids above 65535 are not "
		                   "mapped in a sandbox",
		                   user);
	return 0;
}

static int write_meta(struct job *j, int layers, const char *source,
                      struct sbx_err *err)
{
	json_t *cfg = json_object_get(j->config, "config");
	const char *user = json_string_value(json_object_get(cfg, "User"));
	unsigned uid = 0, gid = 0;
	int r;
	if (user && *user &&
	    (r = resolve_user(layers, j, user, &uid, &gid, err)))
		return r;
	const char *shell = NULL;
	static const char *const shells[][2] = {{"usr/bin/bash", "/bin/bash"},
	                                        {"bin/bash", "/bin/bash"},
	                                        {"bin/sh", "/bin/sh"},
	                                        {"usr/bin/sh", "/bin/sh"}};
	for (size_t i = 0; !shell && i < 4; i++) {
		int fd = image_lookup(layers, j, shells[i][0], true);
		if (fd >= 0) {
			close(fd);
			shell = shells[i][1];
		}
	}
	json_t *ls = json_array();
	for (size_t i = 0; i < j->nlayers; i++)
		json_array_append_new(ls, json_string(j->layer_hex[i]));
	json_t *env = json_object_get(cfg, "Env");
	char digest[80];
	snprintf(digest, sizeof(digest), "sha256:%s", j->digest_hex);
	json_t *m = json_pack(
	    "{s:s, s:o, s:I, s:I, s:s, s:{s:O, s:s?, s:s?, s:i, s:i, s:O, "
	    "s:O}, s:s?, s:s?, s:s?}",
	    "digest", digest, "layers", ls, "sizeBytes", (json_int_t)j->bytes,
	    "createdMs", (json_int_t)now_wall_ms(), "source", source, "config",
	    "env", json_is_array(env) ? env : json_array(), "workingDir",
	    json_string_value(json_object_get(cfg, "WorkingDir")), "user",
	    user && *user ? user : NULL, "uid", (int)uid, "gid", (int)gid,
	    "entrypoint", json_object_get(cfg, "Entrypoint") ?: json_null(),
	    "cmd", json_object_get(cfg, "Cmd") ?: json_null(), "shell", shell,
	    "architecture",
	    json_string_value(json_object_get(j->config, "architecture")), "os",
	    json_string_value(json_object_get(j->config, "os")));
	if (!m)
		return sbx_err_set(err, EINVAL,
		                   "the image's config is malformed");
	char *text = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	if (!text)
		return sbx_err_set(err, ENOMEM, "out of memory");
	char name[96], tmp[128];
	snprintf(name, sizeof(name), "meta/%s.json", j->digest_hex);
	snprintf(tmp, sizeof(tmp), "meta/%s.json.tmp-%d", j->digest_hex,
	         (int)getpid());
	r = fs_write_str(j->store, tmp, text, 0600, err);
	free(text);
	if (r)
		return r;
	if (renameat(j->store, tmp, j->store, name) < 0)
		return sbx_err_sys(err, errno, "rename %s", name);
	return 0;
}

/* dir:/path, a root filesystem as a directory (debootstrap's): made into
 * one uncompressed layer, rootfs.tar in the job's tmp dir, by libarchive
 * reading the tree without following links or entering mounts; its config
 * is the default one, so its digest is that of the synthesized config
 * (which names the layer's). */
static int read_dir(struct job *j, const char *path, struct sbx_err *err)
{
	char hex[SHA256_HEX_LEN + 1];
	int r = 0;
	_cleanup_close_ int out = openat(
	    j->root, "rootfs.tar", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		return sbx_err_sys(err, errno, "create rootfs.tar");
	struct archive *disk = archive_read_disk_new();
	struct archive *w = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	if (!disk || !w || !e) {
		r = sbx_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	archive_read_disk_set_symlink_physical(disk);
	archive_read_disk_set_behavior(disk,
	                               ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS |
	                                   ARCHIVE_READDISK_NO_XATTR);
	archive_write_set_format_pax_restricted(w);
	if (archive_read_disk_open(disk, path) != ARCHIVE_OK ||
	    archive_write_open_fd(w, out) != ARCHIVE_OK) {
		r = sbx_err_set(err, EINVAL, "%s: %s", path,
		                archive_error_string(disk));
		goto out;
	}
	size_t plen = strlen(path);
	while (plen > 1 && path[plen - 1] == '/')
		plen--;
	uint64_t total = 0;
	for (;;) {
		archive_entry_clear(e);
		int ar = archive_read_next_header2(disk, e);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN) {
			r = sbx_err_set(err, EIO, "%s: %s", path,
			                archive_error_string(disk));
			goto out;
		}
		archive_read_disk_descend(disk);
		const char *name = archive_entry_pathname(e);
		if (!name || strncmp(name, path, plen) ||
		    (name[plen] && name[plen] != '/'))
			continue;
		char rel[4200];
		snprintf(rel, sizeof(rel), ".%s", name + plen);
		archive_entry_set_pathname(e, rel);
		if (archive_entry_filetype(e) == AE_IFSOCK)
			continue;
		if (archive_entry_filetype(e) == AE_IFREG &&
		    (total += (uint64_t)archive_entry_size(e)) >
		        IMAGE_MAX_BYTES) {
			r = sbx_err_set(err, EFBIG,
			                "%s: its files pass %llu bytes", path,
			                (unsigned long long)IMAGE_MAX_BYTES);
			goto out;
		}
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			r = sbx_err_set(err, EIO, "%s: %s", rel,
			                archive_error_string(w));
			goto out;
		}
		if (archive_entry_filetype(e) != AE_IFREG)
			continue;
		char buf[1 << 16];
		la_ssize_t n;
		while ((n = archive_read_data(disk, buf, sizeof(buf))) > 0)
			if (archive_write_data(w, buf, (size_t)n) != n) {
				r = sbx_err_set(err, EIO, "%s: %s", rel,
				                archive_error_string(w));
				goto out;
			}
		if (n < 0) {
			r = sbx_err_set(err, EIO, "%s: %s", rel,
			                archive_error_string(disk));
			goto out;
		}
	}
	if (archive_write_close(w) != ARCHIVE_OK) {
		r = sbx_err_set(err, EIO, "rootfs.tar: %s",
		                archive_error_string(w));
		goto out;
	}
	if (lseek(out, 0, SEEK_SET) < 0 ||
	    (r = hash_fd(out, hex, IMAGE_MAX_BYTES * 2, err)))
		goto out;
	char diff[80], path_env[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/"
	                            "sbin:/usr/bin:/sbin:/bin";
	snprintf(diff, sizeof(diff), "sha256:%s", hex);
	j->config =
	    json_pack("{s:s, s:s, s:{s:[s]}, s:{s:s, s:[s]}}", "architecture",
	              host_arch(), "os", "linux", "config", "Env", path_env,
	              "rootfs", "type", "layers", "diff_ids", diff);
	char *text = j->config
	                 ? json_dumps(j->config, JSON_COMPACT | JSON_SORT_KEYS)
	                 : NULL;
	if (!text || add_layer(j, "rootfs.tar", hex) < 0) {
		free(text);
		r = sbx_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	sha256_hex(text, strlen(text), j->digest_hex);
	free(text);
out:
	if (e)
		archive_entry_free(e);
	if (disk)
		archive_read_free(disk);
	if (w)
		archive_write_free(w);
	return r;
}

/* The import's own scratch dir in the store, made and opened as its root. */
static int open_tmp(struct job *j, int store, struct sbx_err *err)
{
	if (mkdirat(store, j->tmpname, 0700) < 0)
		return sbx_err_sys(err, errno, "mkdir %s", j->tmpname);
	j->root = openat(store, j->tmpname,
	                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (j->root < 0)
		return sbx_err_sys(err, errno, "open %s", j->tmpname);
	return 0;
}

static int child_import(int store, int in_fd, const char *kind,
                        const char *path, const char *tag, struct job *j,
                        struct sbx_err *err)
{
	int r;
	memset(j, 0, sizeof(*j));
	j->store = store;
	j->root = -1;
	j->tag = tag;
	snprintf(j->tmpname, sizeof(j->tmpname), "tmp/imp-%d", (int)getpid());
	bool dir = !strcmp(kind, "dir");
	if (dir) {
		if ((r = open_tmp(j, store, err)))
			return r;
		if ((r = read_dir(j, path, err)))
			return r;
	} else if (!strcmp(kind, "oci-layout")) {
		j->root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (j->root < 0)
			return sbx_err_sys(err, errno, "%s", path);
	} else {
		_cleanup_close_ int fd =
		    in_fd >= 0 ? in_fd : open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return sbx_err_sys(err, errno, "%s", path);
		if ((r = open_tmp(j, store, err)))
			return r;
		struct layer_limits lim = {.max_bytes = IMAGE_MAX_BYTES,
		                           .max_entries = 1000000};
		struct layer_stats st;
		if ((r = layer_unpack(fd, j->root, LAYER_PLAIN, &lim, &st,
		                      err)))
			return r;
	}
	struct stat st;
	bool oci = !dir && fstatat(j->root, "index.json", &st, 0) == 0;
	bool docker = !dir && fstatat(j->root, "manifest.json", &st, 0) == 0;
	if (dir)
		r = 0;
	else if (docker && (!oci || !strcmp(kind, "docker-archive")))
		r = read_docker(j, err);
	else if (oci)
		r = read_oci(j, err);
	else
		return sbx_err_set(err, EINVAL,
		                   "neither an OCI image layout (index.json) "
		                   "nor a docker save archive (manifest.json)");
	if (r)
		return r;
	if (j->nlayers > IMAGE_MAX_LAYERS)
		return sbx_err_set(err, E2BIG,
		                   "%zu layers: at most %d are taken",
		                   j->nlayers, IMAGE_MAX_LAYERS);
	_cleanup_close_ int layers = openat(
	    store, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layers < 0)
		return sbx_err_sys(err, errno, "open layers");
	for (size_t i = 0; i < j->nlayers; i++)
		if ((r = unpack_layer(j, layers, i, err)))
			return r;
	char source[4200];
	snprintf(source, sizeof(source), "%s%s%s", kind, path ? ":" : "",
	         path ? path : "");
	return write_meta(j, layers, source, err);
}

static _Noreturn void child_main(int store, int res, int in_fd,
                                 const char *kind, const char *path,
                                 const char *tag)
{
	struct sbx_err err = {0};
	struct job j;
	int r = child_import(store, in_fd, kind, path, tag, &j, &err);
	if (j.root >= 0)
		close(j.root);
	if (j.tmpname[0])
		fs_remove_tree(store, j.tmpname, NULL);
	char out[RESULT_MAX];
	int n;
	if (r)
		n = snprintf(out, sizeof(out), "!%d %s",
		             err.code ? err.code : EIO, err.msg);
	else
		n = snprintf(out, sizeof(out), "%s", j.digest_hex);
	if (n > 0) {
		ssize_t w = write(
		    res, out, (size_t)(n < RESULT_MAX ? n : RESULT_MAX - 1));
		(void)w;
	}
	_exit(r ? 1 : 0);
}

/* ---- the loop's side -------------------------------------------------- */

static void image_free(struct image *img)
{
	if (!img)
		return;
	for (size_t i = 0; i < img->nlayers; i++)
		free(img->layers[i]);
	free(img->layers);
	for (size_t i = 0; i < img->envc; i++)
		free(img->env[i]);
	free(img->env);
	free(img->working_dir);
	free(img->user);
	free(img->cmd_json);
	free(img);
}

static struct image *image_load(struct images *im, const char *hex)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/meta/%s.json", im->dir, hex);
	json_error_t je;
	json_t *m = json_load_file(path, 0, &je);
	if (!m)
		return NULL;
	struct image *img = calloc(1, sizeof(*img));
	json_t *cfg = json_object_get(m, "config");
	json_t *ls = json_object_get(m, "layers");
	json_t *env = json_object_get(cfg, "env");
	const char *d = json_string_value(json_object_get(m, "digest"));
	if (!img || !d || !digest_hex(d) || strcmp(digest_hex(d), hex))
		goto fail;
	snprintf(img->digest, sizeof(img->digest), "%s", d);
	img->nlayers = json_array_size(ls);
	img->layers = calloc(img->nlayers + 1, sizeof(char *));
	img->envc = json_array_size(env);
	img->env = calloc(img->envc + 1, sizeof(char *));
	if (!img->layers || !img->env)
		goto fail;
	for (size_t i = 0; i < img->nlayers; i++) {
		const char *h = json_string_value(json_array_get(ls, i));
		if (!h || !hex64(h) || !(img->layers[i] = strdup(h)))
			goto fail;
	}
	size_t k = 0;
	for (size_t i = 0; i < img->envc; i++) {
		const char *e = json_string_value(json_array_get(env, i));
		if (e && strchr(e, '=') && e[0] != '=')
			img->env[k++] = strdup(e);
	}
	img->envc = k;
	const char *wd = json_string_value(json_object_get(cfg, "workingDir"));
	if (wd && wd[0] == '/')
		img->working_dir = strdup(wd);
	const char *u = json_string_value(json_object_get(cfg, "user"));
	if (u)
		img->user = strdup(u);
	img->uid = (uid_t)json_integer_value(json_object_get(cfg, "uid"));
	img->gid = (gid_t)json_integer_value(json_object_get(cfg, "gid"));
	img->size_bytes =
	    (uint64_t)json_integer_value(json_object_get(m, "sizeBytes"));
	img->created_ms =
	    (uint64_t)json_integer_value(json_object_get(m, "createdMs"));
	const char *sh = json_string_value(json_object_get(m, "shell"));
	img->shell = sh && !strcmp(sh, "/bin/bash") ? "/bin/bash"
	             : sh && !strcmp(sh, "/bin/sh") ? "/bin/sh"
	                                            : NULL;
	json_t *cj =
	    json_pack("{s:O, s:O}", "entrypoint",
	              json_object_get(cfg, "entrypoint") ?: json_null(), "cmd",
	              json_object_get(cfg, "cmd") ?: json_null());
	img->cmd_json = cj ? json_dumps(cj, JSON_COMPACT) : NULL;
	json_decref(cj);
	json_decref(m);
	return img;
fail:
	json_decref(m);
	image_free(img);
	return NULL;
}

static struct image *by_digest(struct images *im, const char *hex)
{
	for (struct image *i = im->list; i; i = i->next)
		if (!strcmp(i->digest + 7, hex))
			return i;
	return NULL;
}

static struct image *load_or_find(struct images *im, const char *hex)
{
	struct image *img = by_digest(im, hex);
	if (img)
		return img;
	if (!(img = image_load(im, hex)))
		return NULL;
	img->next = im->list;
	im->list = img;
	return img;
}

static struct image_name *name_slot(struct images *im, const char *name)
{
	for (size_t i = 0; i < im->nnames; i++)
		if (!strcmp(im->names[i].name, name))
			return &im->names[i];
	return NULL;
}

static int set_name(struct images *im, const char *name, struct image *img,
                    struct sbx_err *err)
{
	char f[600], path[4800];
	name_file(name, f, sizeof(f));
	snprintf(path, sizeof(path), "%s/names/%s", im->dir, f);
	char tmp[4900];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int r = fs_write_str(AT_FDCWD, tmp, img->digest + 7, 0600, err);
	if (r)
		return r;
	if (rename(tmp, path) < 0)
		return sbx_err_sys(err, errno, "rename %s", path);
	struct image_name *s = name_slot(im, name);
	if (s) {
		s->img = img;
		return 0;
	}
	struct image_name *n =
	    realloc(im->names, (im->nnames + 1) * sizeof(*n));
	if (!n)
		return sbx_err_set(err, ENOMEM, "out of memory");
	im->names = n;
	n[im->nnames].name = strdup(name);
	n[im->nnames].img = img;
	if (!n[im->nnames].name)
		return sbx_err_set(err, ENOMEM, "out of memory");
	im->nnames++;
	return 0;
}

static void import_unlink(struct image_import *imp)
{
	struct images *im = imp->im;
	for (struct image_import **p = &im->imports; *p; p = &(*p)->next)
		if (*p == imp) {
			*p = imp->next;
			im->nimports--;
			break;
		}
}

static void import_free(struct image_import *imp, bool kill_child)
{
	struct images *im = imp->im;
	if (imp->res_w.active)
		loop_del(im->loop, &imp->res_w);
	if (imp->in_w.active)
		loop_del(im->loop, &imp->in_w);
	if (imp->res_fd >= 0)
		close(imp->res_fd);
	if (imp->in_fd >= 0)
		close(imp->in_fd);
	if (imp->pid > 0) {
		if (kill_child)
			kill(imp->pid, SIGKILL);
		int st;
		/* it has closed its result pipe: it is exiting, or killed */
		while (waitpid(imp->pid, &st, 0) < 0 && errno == EINTR)
			;
		/* a killed one's half-unpacked archive: to the trash (its
		 * half-unpacked layer goes at the next images_gc) */
		char src[4200], dst[4300];
		snprintf(src, sizeof(src), "%s/tmp/imp-%d", im->dir,
		         (int)imp->pid);
		snprintf(dst, sizeof(dst), "%s/image-imp-%d.%llu",
		         im->trash_dir, (int)imp->pid,
		         (unsigned long long)now_wall_ms());
		if (kill_child && rename(src, dst) < 0 && errno != ENOENT)
			log_warn("event=image-import-left dir=%s %s", src,
			         strerror(errno));
	}
	import_unlink(imp);
	free(imp->name);
	free(imp);
}

static void on_result(struct loop_watch *w, uint32_t events)
{
	struct image_import *imp = w->data;
	(void)events;
	for (;;) {
		ssize_t n = read(imp->res_fd, imp->res + imp->nres,
		                 sizeof(imp->res) - 1 - imp->nres);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n > 0) {
			imp->nres += (size_t)n;
			if (imp->nres < sizeof(imp->res) - 1)
				continue;
		}
		break; /* EOF, an error, or full */
	}
	imp->res[imp->nres] = '\0';
	struct images *im = imp->im;
	struct sbx_err err = {0};
	struct image *img = NULL;
	if (imp->res[0] == '!') {
		char *sp = strchr(imp->res, ' ');
		int code = atoi(imp->res + 1);
		sbx_err_set(&err, code > 0 ? code : EIO, "%s",
		            sp ? sp + 1 : "the import failed");
	} else if (!hex64(imp->res)) {
		sbx_err_set(&err, EIO, "the import ended without a result");
	} else if (!(img = load_or_find(im, imp->res))) {
		sbx_err_set(&err, EIO, "the image's record cannot be read");
	} else if (set_name(im, imp->name, img, &err) < 0) {
		img = NULL;
	}
	image_done_cb done = imp->done;
	void *ctx = imp->ctx;
	import_free(imp, !img);
	if (img)
		log_info("event=image-imported digest=%s", img->digest);
	if (done)
		done(ctx, img, &err);
}

static int start_child(struct images *im, const char *name, const char *kind,
                       const char *path, const char *tag, bool stream,
                       image_done_cb done, void *ctx, struct image_import **out,
                       struct sbx_err *err)
{
	if (!image_name_valid(name))
		return sbx_err_set(err, EINVAL,
		                   "image name: 1-%d of [a-zA-Z0-9._:@/-], not "
		                   "starting with . or /",
		                   IMAGE_NAME_MAX);
	struct image_import *imp = calloc(1, sizeof(*imp));
	if (!imp || !(imp->name = strdup(name))) {
		free(imp);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	imp->im = im;
	imp->res_fd = imp->in_fd = -1;
	imp->done = done;
	imp->ctx = ctx;
	int res[2], in[2] = {-1, -1};
	if (pipe2(res, O_CLOEXEC) < 0 || (stream && pipe2(in, O_CLOEXEC) < 0)) {
		int e = errno;
		free(imp->name);
		free(imp);
		return sbx_err_sys(err, e, "pipe");
	}
	int store = open(im->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pid_t pid = store < 0 ? -1 : fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		/* its fds at 3, 4, 5; none of the daemon's others */
		int s = fcntl(store, F_DUPFD_CLOEXEC, 10);
		int rs = fcntl(res[1], F_DUPFD_CLOEXEC, 10);
		int is = stream ? fcntl(in[0], F_DUPFD_CLOEXEC, 10) : -1;
		if (s < 0 || rs < 0 || dup3(s, 3, O_CLOEXEC) < 0 ||
		    dup3(rs, 4, O_CLOEXEC) < 0 ||
		    (stream && dup3(is, 5, O_CLOEXEC) < 0))
			_exit(1);
		syscall(SYS_close_range, stream ? 6 : 5, ~0U, 0);
		child_main(3, 4, stream ? 5 : -1, kind, path, tag);
	}
	int e = errno;
	if (store >= 0)
		close(store);
	close(res[1]);
	if (stream)
		close(in[0]);
	if (pid < 0) {
		close(res[0]);
		if (stream)
			close(in[1]);
		free(imp->name);
		free(imp);
		return sbx_err_sys(err, e, "fork the importer");
	}
	imp->pid = pid;
	imp->res_fd = res[0];
	fcntl(imp->res_fd, F_SETFL, O_NONBLOCK);
	if (stream) {
		imp->in_fd = in[1];
		fcntl(imp->in_fd, F_SETFL, O_NONBLOCK);
	}
	imp->res_w = (struct loop_watch){
	    .fd = imp->res_fd, .cb = on_result, .data = imp};
	imp->next = im->imports;
	im->imports = imp;
	im->nimports++;
	if (loop_add(im->loop, &imp->res_w, EPOLLIN) < 0) {
		e = errno;
		imp->done = NULL;
		import_free(imp, true);
		return sbx_err_sys(err, e, "watch the importer");
	}
	if (out)
		*out = imp;
	return 0;
}

int images_import(struct images *im, const char *name, const char *source,
                  image_done_cb done, void *ctx, struct image_import **out,
                  struct sbx_err *err)
{
	static const char *const kinds[] = {"oci-layout", "oci-archive",
	                                    "docker-archive", "dir"};
	const char *colon = source ? strchr(source, ':') : NULL;
	const char *kind = NULL;
	for (size_t i = 0; colon && i < 4; i++)
		if ((size_t)(colon - source) == strlen(kinds[i]) &&
		    !strncmp(source, kinds[i], strlen(kinds[i])))
			kind = kinds[i];
	if (!kind || colon[1] != '/')
		return sbx_err_set(err, EINVAL,
		                   "source: \"oci-layout:/path[:tag]\", "
		                   "\"oci-archive:/path[:tag]\", "
		                   "\"docker-archive:/path[:tag]\" or "
		                   "\"dir:/path\"");
	char path[4096];
	snprintf(path, sizeof(path), "%s", colon + 1);
	/* "/path:tag", where a tag may hold ':' (docker's "name:tag"): the
	 * first ':' after the path's last '/', unless the whole is a path */
	const char *tag = NULL;
	struct stat st;
	char *slash = strrchr(path, '/');
	char *sep = slash ? strchr(slash, ':') : NULL;
	if (sep && stat(path, &st) < 0) {
		*sep = '\0';
		tag = sep + 1;
		if (!*tag)
			tag = NULL;
	}
	if (stat(path, &st) < 0)
		return sbx_err_sys(err, errno, "%s", path);
	bool want_dir = !strcmp(kind, "oci-layout") || !strcmp(kind, "dir");
	if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return sbx_err_set(err, EINVAL, "%s: not a %s", path,
		                   want_dir ? "directory" : "file");
	if (tag && !strcmp(kind, "dir"))
		return sbx_err_set(err, EINVAL, "dir:%s: no tag is taken",
		                   path);
	return start_child(im, name, kind, path, tag, false, done, ctx, out,
	                   err);
}

int images_import_stream(struct images *im, const char *name,
                         image_done_cb done, void *ctx,
                         struct image_import **out, struct sbx_err *err)
{
	return start_child(im, name, "archive", NULL, NULL, true, done, ctx,
	                   out, err);
}

static void on_in_writable(struct loop_watch *w, uint32_t events)
{
	struct image_import *imp = w->data;
	(void)events;
	loop_del(imp->im->loop, &imp->in_w);
	if (imp->on_drain)
		imp->on_drain(imp->ctx);
}

size_t images_import_write(struct image_import *imp, const char *data,
                           size_t len, void (*on_drain)(void *ctx))
{
	size_t done = 0;
	while (imp->in_fd >= 0 && done < len) {
		ssize_t n = write(imp->in_fd, data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			imp->on_drain = on_drain;
			if (!imp->in_w.active) {
				imp->in_w =
				    (struct loop_watch){.fd = imp->in_fd,
				                        .cb = on_in_writable,
				                        .data = imp};
				if (loop_add(imp->im->loop, &imp->in_w,
				             EPOLLOUT) < 0)
					return len; /* cannot wait: drop */
			}
			return done;
		}
		if (n <= 0) /* the child stopped reading: its error follows */
			return len;
		done += (size_t)n;
	}
	return len;
}

void images_import_write_end(struct image_import *imp)
{
	if (imp->in_w.active)
		loop_del(imp->im->loop, &imp->in_w);
	if (imp->in_fd >= 0)
		close(imp->in_fd);
	imp->in_fd = -1;
}

void images_import_cancel(struct image_import *imp)
{
	imp->done = NULL;
	import_free(imp, true);
}

struct image *images_find(struct images *im, const char *name)
{
	if (!name)
		return NULL;
	const char *hex = digest_hex(name);
	if (hex)
		return by_digest(im, hex);
	struct image_name *s = name_slot(im, name);
	return s ? s->img : NULL;
}

size_t images_names_of(struct images *im, const struct image *img,
                       const char **names, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < im->nnames && n < cap; i++)
		if (im->names[i].img == img)
			names[n++] = im->names[i].name;
	return n;
}

static bool named(struct images *im, const struct image *img)
{
	for (size_t i = 0; i < im->nnames; i++)
		if (im->names[i].img == img)
			return true;
	return false;
}

/* a layer, its size file: to the trash, which the runtime empties */
static void trash_layer(struct images *im, const char *hex)
{
	char src[4200], dst[4300], sz[4300];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(src, sizeof(src), "%s/layers/%s", im->dir, hex);
	snprintf(dst, sizeof(dst), "%s/layer-%.12s.%lld.%09ld", im->trash_dir,
	         hex, (long long)ts.tv_sec, ts.tv_nsec);
	snprintf(sz, sizeof(sz), "%s.size", src);
	unlink(sz);
	if (rename(src, dst) < 0 && errno != ENOENT)
		log_warn("event=image-layer-kept layer=%s %s", hex,
		         strerror(errno));
}

void images_gc(struct images *im,
               bool (*in_use)(void *data, const struct image *img), void *data)
{
	if (im->nimports)
		return; /* an import may be about to name what looks unused */
	for (struct image **p = &im->list; *p;) {
		struct image *img = *p;
		if (named(im, img) || (in_use && in_use(data, img))) {
			p = &img->next;
			continue;
		}
		char path[4200];
		snprintf(path, sizeof(path), "%s/meta/%s.json", im->dir,
		         img->digest + 7);
		unlink(path);
		log_info("event=image-removed digest=%s", img->digest);
		*p = img->next;
		image_free(img);
	}
	/* layers no image has */
	char ld[4200];
	snprintf(ld, sizeof(ld), "%s/layers", im->dir);
	DIR *d = opendir(ld);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!hex64(de->d_name)) {
			/* a half-unpacked one of a dead import */
			if (strstr(de->d_name, ".tmp-"))
				trash_layer(im, de->d_name);
			continue;
		}
		bool used = false;
		for (struct image *i = im->list; i && !used; i = i->next)
			for (size_t k = 0; k < i->nlayers && !used; k++)
				used = !strcmp(i->layers[k], de->d_name);
		if (!used)
			trash_layer(im, de->d_name);
	}
	if (d)
		closedir(d);
}

int images_delete(struct images *im, const char *name, unsigned refs,
                  struct sbx_err *err)
{
	struct image_name *s = name_slot(im, name);
	if (!s)
		return sbx_err_set(err, ENOENT, "no image named %s", name);
	if (refs)
		return sbx_err_set(err, EBUSY,
		                   "image %s is used by %u sandbox%s", name,
		                   refs, refs == 1 ? "" : "es");
	char f[600], path[4800];
	name_file(name, f, sizeof(f));
	snprintf(path, sizeof(path), "%s/names/%s", im->dir, f);
	if (unlink(path) < 0 && errno != ENOENT)
		return sbx_err_sys(err, errno, "unlink %s", path);
	free(s->name);
	*s = im->names[--im->nnames];
	return 0;
}

int images_open(struct loop *loop, const char *state_dir, const char *trash_dir,
                struct images **out, struct sbx_err *err)
{
	struct images *im = calloc(1, sizeof(*im));
	int r;
	if (!im || asprintf(&im->dir, "%s/images", state_dir) < 0 ||
	    !(im->trash_dir = strdup(trash_dir))) {
		if (im)
			free(im->dir);
		free(im);
		return sbx_err_set(err, ENOMEM, "out of memory");
	}
	im->loop = loop;
	_cleanup_close_ int tmp = -1;
	_cleanup_close_ int sd =
	    open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sd < 0) {
		r = sbx_err_sys(err, errno, "open %s", state_dir);
		goto fail;
	}
	/* root's alone: layers keep their setuid files */
	if ((r = fs_mkdirs(sd, "images/layers", 0700, err)) ||
	    (r = fs_mkdirs(sd, "images/meta", 0700, err)) ||
	    (r = fs_mkdirs(sd, "images/names", 0700, err)) ||
	    (r = fs_mkdirs(sd, "images/tmp", 0700, err)))
		goto fail;
	if (fchmodat(sd, "images", 0700, 0) < 0) {
		r = sbx_err_sys(err, errno, "chmod images");
		goto fail;
	}
	/* what dead imports left */
	tmp = openat(sd, "images/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tmp >= 0)
		fs_empty_dir(tmp, NULL);
	char nd[4200];
	snprintf(nd, sizeof(nd), "%s/names", im->dir);
	DIR *d = opendir(nd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || strstr(de->d_name, ".tmp"))
			continue;
		char buf[128], name[IMAGE_NAME_MAX + 1];
		_cleanup_close_ int dfd =
		    dirfd(d) >= 0 ? fcntl(dirfd(d), F_DUPFD_CLOEXEC, 0) : -1;
		ssize_t n = fs_read_small(dfd, de->d_name, buf, sizeof(buf));
		if (n <= 0)
			continue;
		buf[strcspn(buf, "\n")] = '\0';
		name_decode(de->d_name, name, sizeof(name));
		struct image *img = hex64(buf) ? load_or_find(im, buf) : NULL;
		if (!img) {
			log_warn("event=image-unreadable name=%s", name);
			continue;
		}
		struct image_name *nn =
		    realloc(im->names, (im->nnames + 1) * sizeof(*nn));
		if (!nn)
			break;
		im->names = nn;
		nn[im->nnames].name = strdup(name);
		nn[im->nnames].img = img;
		if (nn[im->nnames].name)
			im->nnames++;
	}
	if (d)
		closedir(d);
	/* and the unnamed ones sandboxes still use */
	snprintf(nd, sizeof(nd), "%s/meta", im->dir);
	d = opendir(nd);
	while (d && (de = readdir(d))) {
		char hex[80];
		size_t l = strlen(de->d_name);
		if (l != SHA256_HEX_LEN + 5 ||
		    strcmp(de->d_name + SHA256_HEX_LEN, ".json"))
			continue;
		snprintf(hex, sizeof(hex), "%.64s", de->d_name);
		load_or_find(im, hex);
	}
	if (d)
		closedir(d);
	*out = im;
	return 0;
fail:
	images_close(im);
	return r;
}

void images_close(struct images *im)
{
	if (!im)
		return;
	while (im->imports)
		images_import_cancel(im->imports);
	while (im->list) {
		struct image *n = im->list->next;
		image_free(im->list);
		im->list = n;
	}
	for (size_t i = 0; i < im->nnames; i++)
		free(im->names[i].name);
	free(im->names);
	free(im->dir);
	free(im->trash_dir);
	free(im);
}
