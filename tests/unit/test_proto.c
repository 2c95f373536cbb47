/* daemon<->init packets: spawn encoding round trip, and that malformed
 * packets are refused rather than read past their end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/proto.h"

static void test_spawn_roundtrip(void **state)
{
	(void)state;
	const char *argv[] = {"/bin/bash", "-c", "echo hi", NULL};
	const char *envp[] = {"A=1", "PATH=/bin", NULL};
	struct spawn_req req = {.flags = SPAWN_CWD_FALLBACK,
	                        .nstdio = 3,
	                        .targets = {1, 2, 3},
	                        .ncg = 2,
	                        .cwd = "/workspace",
	                        .argc = 3,
	                        .envc = 2,
	                        .argv = argv,
	                        .envp = envp,
	                        .uid = 1000,
	                        .gid = 100};
	char buf[4096];
	ssize_t n = proto_spawn_encode(&req, buf, sizeof(buf));
	assert_true(n > 0);
	struct spawn_req out;
	struct sbx_err err;
	assert_int_equal(proto_spawn_decode(buf, (size_t)n, &out, &err), 0);
	assert_int_equal(out.flags, SPAWN_CWD_FALLBACK);
	assert_int_equal(out.nstdio, 3);
	assert_int_equal(out.targets[2], 3);
	assert_int_equal(out.ncg, 2);
	assert_string_equal(out.cwd, "/workspace");
	assert_int_equal(out.uid, 1000);
	assert_int_equal(out.gid, 100);
	assert_int_equal(out.argc, 3);
	assert_string_equal(out.argv[2], "echo hi");
	assert_null(out.argv[3]);
	assert_int_equal(out.envc, 2);
	assert_string_equal(out.envp[1], "PATH=/bin");
	free((void *)out.argv);
	free((void *)out.envp);
}

static void test_spawn_truncated(void **state)
{
	(void)state;
	const char *argv[] = {"/bin/true", NULL};
	struct spawn_req req = {.cwd = "/", .argc = 1, .argv = argv};
	char buf[256];
	ssize_t n = proto_spawn_encode(&req, buf, sizeof(buf));
	assert_true(n > 0);
	struct spawn_req out;
	struct sbx_err err;
	/* every shorter prefix is refused */
	for (ssize_t k = 0; k < n; k++)
		assert_true(proto_spawn_decode(buf, (size_t)k, &out, &err) < 0);
	/* trailing bytes too */
	buf[n] = 'x';
	assert_true(proto_spawn_decode(buf, (size_t)n + 1, &out, &err) < 0);
}

static void test_spawn_bad_counts(void **state)
{
	(void)state;
	const char *argv[] = {"/bin/true", NULL};
	struct spawn_req req = {.cwd = "/",
	                        .argc = 1,
	                        .argv = argv,
	                        .nstdio = 1,
	                        .targets = {PROTO_MAX_TARGET_FD}};
	char buf[256];
	ssize_t n = proto_spawn_encode(&req, buf, sizeof(buf));
	struct spawn_req out;
	struct sbx_err err;
	assert_true(proto_spawn_decode(buf, (size_t)n, &out, &err) < 0);
	req.targets[0] = -1;
	n = proto_spawn_encode(&req, buf, sizeof(buf));
	assert_true(proto_spawn_decode(buf, (size_t)n, &out, &err) < 0);
	/* two fds at one number: the second would replace the first */
	req.nstdio = 2;
	req.targets[0] = req.targets[1] = 1;
	n = proto_spawn_encode(&req, buf, sizeof(buf));
	assert_true(proto_spawn_decode(buf, (size_t)n, &out, &err) < 0);
	/* an id the sandbox's user namespace does not map */
	req.nstdio = 1;
	req.targets[0] = 0;
	req.uid = 65536;
	n = proto_spawn_encode(&req, buf, sizeof(buf));
	assert_true(proto_spawn_decode(buf, (size_t)n, &out, &err) < 0);
	req.uid = 0;
	req.gid = 70000;
	n = proto_spawn_encode(&req, buf, sizeof(buf));
	assert_true(proto_spawn_decode(buf, (size_t)n, &out, &err) < 0);
	req.gid = 0;
	req.argc = 0;
	n = proto_spawn_encode(&req, buf, sizeof(buf));
	assert_true(proto_spawn_decode(buf, (size_t)n, &out, &err) < 0);
}

static void test_encode_too_big(void **state)
{
	(void)state;
	const char *argv[] = {"/bin/true", NULL};
	struct spawn_req req = {.cwd = "/", .argc = 1, .argv = argv};
	char buf[16];
	assert_int_equal(proto_spawn_encode(&req, buf, sizeof(buf)), -E2BIG);
}

static void test_send_recv_fds(void **state)
{
	(void)state;
	int sv[2], p[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(pipe(p), 0);
	struct proto_status st = {.pid = 42, .status = 7};
	assert_int_equal(
	    proto_send(sv[0], PROTO_EXIT, 99, &st, sizeof(st), &p[1], 1), 0);
	char buf[1024];
	struct proto_hdr h;
	const void *payload;
	int fds[PROTO_MAX_FDS];
	size_t nfds;
	assert_int_equal(
	    proto_recv(sv[1], buf, sizeof(buf), &h, &payload, fds, &nfds), 1);
	assert_int_equal(h.type, PROTO_EXIT);
	assert_int_equal(h.id, 99);
	assert_int_equal(h.len, sizeof(st));
	assert_int_equal(nfds, 1);
	struct proto_status got;
	memcpy(&got, payload, sizeof(got));
	assert_int_equal(got.pid, 42);
	/* the passed fd is the pipe's write end */
	assert_int_equal(write(fds[0], "x", 1), 1);
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	close(fds[0]);
	/* nothing more: EAGAIN, then EOF after close */
	assert_int_equal(
	    proto_recv(sv[1], buf, sizeof(buf), &h, &payload, fds, &nfds),
	    -EAGAIN);
	close(sv[0]);
	assert_int_equal(
	    proto_recv(sv[1], buf, sizeof(buf), &h, &payload, fds, &nfds), 0);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

static void test_recv_truncated_packet(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	char big[512] = {0};
	assert_int_equal(
	    proto_send(sv[0], PROTO_EXIT, 1, big, sizeof(big), NULL, 0), 0);
	char buf[64];
	struct proto_hdr h;
	const void *payload;
	int fds[PROTO_MAX_FDS];
	size_t nfds;
	assert_int_equal(
	    proto_recv(sv[1], buf, sizeof(buf), &h, &payload, fds, &nfds),
	    -EPROTO);
	/* a lying length field */
	struct proto_hdr bad = {.type = PROTO_EXIT, .len = 1000};
	assert_int_equal(send(sv[0], &bad, sizeof(bad), 0),
	                 (ssize_t)sizeof(bad));
	assert_int_equal(
	    proto_recv(sv[1], buf, sizeof(buf), &h, &payload, fds, &nfds),
	    -EPROTO);
	close(sv[0]);
	close(sv[1]);
}

/* init's parameters: a filter of three instructions and one of two */
static struct sock_filter f0[] = {
    {0x20, 0, 0, 4}, {0x15, 0, 1, 0xc000003e}, {0x06, 0, 0, 0x7fff0000}};

static struct init_params sample_params(void)
{
	struct init_params p = {.base = 1879048192,
	                        .max_ptys = 64,
	                        .disk_bytes = 10ull << 30,
	                        .image_dir = "/var/lib/sandboxd/image/default",
	                        .usr_mask = NULL,
	                        .mnt_dir = "/var/lib/sandboxd/run/mnt",
	                        .sandbox_dir = "/var/lib/sandboxd/sandboxes/s3",
	                        .layers_dir = "/var/lib/sandboxd/images/layers",
	                        .image_top = "/var/lib/sandboxd/image/top"};
	p.seccomp = (struct seccomp_prog){.insns = f0, .len = 3};
	return p;
}

static void test_init_roundtrip(void **state)
{
	(void)state;
	struct init_params p = sample_params(), out;
	struct sbx_err err;
	char buf[1024];
	static const char *const layers[] = {"sha256-aa", "sha256-bb"};
	for (int mask = 0; mask < 2; mask++) {
		p.usr_mask = mask ? "/var/lib/sandboxd/image/usrmask" : NULL;
		/* an image sandbox's layers go with the second round */
		p.layers = mask ? layers : NULL;
		p.nlayers = mask ? 2 : 0;
		ssize_t n = proto_init_encode(&p, buf, sizeof(buf));
		assert_true(n > 0);
		assert_int_equal(proto_init_decode(buf, (size_t)n, &out, &err),
		                 0);
		assert_int_equal(out.base, p.base);
		assert_int_equal(out.max_ptys, 64);
		assert_true(out.disk_bytes == p.disk_bytes);
		assert_string_equal(out.image_dir, p.image_dir);
		if (mask)
			assert_string_equal(out.usr_mask, p.usr_mask);
		else
			assert_null(out.usr_mask);
		assert_string_equal(out.mnt_dir, p.mnt_dir);
		assert_string_equal(out.sandbox_dir, p.sandbox_dir);
		assert_int_equal(out.seccomp.len, 3);
		assert_memory_equal(out.seccomp.insns, f0, sizeof(f0));
		assert_string_equal(out.layers_dir, p.layers_dir);
		assert_string_equal(out.image_top, p.image_top);
		assert_int_equal(out.nlayers, p.nlayers);
		for (uint32_t i = 0; i < p.nlayers; i++)
			assert_string_equal(out.layers[i], layers[i]);
		if (!mask)
			assert_null(out.layers);
		free((void *)out.layers);
		seccomp_prog_free(&out.seccomp);
	}
}

static void test_init_malformed(void **state)
{
	(void)state;
	struct init_params p = sample_params(), out;
	struct sbx_err err;
	char buf[1024];
	ssize_t n = proto_init_encode(&p, buf, sizeof(buf));
	assert_true(n > 0);
	/* every shorter prefix, and trailing bytes, are refused */
	for (ssize_t k = 0; k < n; k++)
		assert_true(proto_init_decode(buf, (size_t)k, &out, &err) < 0);
	buf[n] = '/';
	assert_true(proto_init_decode(buf, (size_t)n + 1, &out, &err) < 0);
	/* a relative path, an empty one, an empty or oversized filter */
	p.mnt_dir = "run/mnt";
	n = proto_init_encode(&p, buf, sizeof(buf));
	assert_true(proto_init_decode(buf, (size_t)n, &out, &err) < 0);
	p.mnt_dir = "";
	n = proto_init_encode(&p, buf, sizeof(buf));
	assert_true(proto_init_decode(buf, (size_t)n, &out, &err) < 0);
	p = sample_params();
	p.seccomp.len = 0;
	n = proto_init_encode(&p, buf, sizeof(buf));
	assert_true(proto_init_decode(buf, (size_t)n, &out, &err) < 0);
	p = sample_params();
	n = proto_init_encode(&p, buf, sizeof(buf));
	uint32_t huge = BPF_MAXINSNS + 1; /* the filter's length */
	memcpy(buf + 16, &huge, sizeof(huge));
	assert_true(proto_init_decode(buf, (size_t)n, &out, &err) < 0);
	assert_int_equal(proto_init_encode(&p, buf, 40), -E2BIG);
	/* a layer name with a '/', or "..", would reach out of layers_dir */
	p = sample_params();
	const char *bad[] = {"../../etc"};
	p.layers = bad;
	p.nlayers = 1;
	n = proto_init_encode(&p, buf, sizeof(buf));
	assert_true(proto_init_decode(buf, (size_t)n, &out, &err) < 0);
	bad[0] = "..";
	n = proto_init_encode(&p, buf, sizeof(buf));
	assert_true(proto_init_decode(buf, (size_t)n, &out, &err) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spawn_roundtrip),
	    cmocka_unit_test(test_spawn_truncated),
	    cmocka_unit_test(test_spawn_bad_counts),
	    cmocka_unit_test(test_encode_too_big),
	    cmocka_unit_test(test_send_recv_fds),
	    cmocka_unit_test(test_recv_truncated_packet),
	    cmocka_unit_test(test_init_roundtrip),
	    cmocka_unit_test(test_init_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
