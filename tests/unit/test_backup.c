/* The pure parts of backups: the metadata's JSON both ways (and what it
 * refuses), tenant keys, the AWS shared-credentials format, the S3 XML
 * answers and query strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backup.h"
#include "core/s3.h"

static void test_info_round_trip(void **state)
{
	(void)state;
	char *ex[] = {"node_modules", "*.log"};
	struct backup_info in = {.tenant = "alpha \"quoted\"",
	                         .sandbox = "sb-1",
	                         .dir = "/workspace",
	                         .excludes = ex,
	                         .nexcludes = 2,
	                         .size_bytes = 1ull << 33,
	                         .created_ms = 1700000000123,
	                         .expires_ms = 1700000100123};
	snprintf(in.id, sizeof(in.id), "bkp_0123456789ab");
	memset(in.sha256, 'a', 64);
	in.sha256[64] = '\0';
	char *text = backup_info_encode(&in);
	assert_non_null(text);
	struct backup_info out;
	assert_int_equal(backup_info_parse(text, strlen(text), &out), 0);
	assert_string_equal(out.id, in.id);
	assert_string_equal(out.tenant, in.tenant);
	assert_string_equal(out.sandbox, "sb-1");
	assert_string_equal(out.dir, "/workspace");
	assert_int_equal(out.nexcludes, 2);
	assert_string_equal(out.excludes[1], "*.log");
	assert_string_equal(out.sha256, in.sha256);
	assert_true(out.size_bytes == 1ull << 33);
	assert_true(out.expires_ms == 1700000100123);
	backup_info_clear(&out);
	free(text);
}

static void test_info_refuses(void **state)
{
	(void)state;
	struct backup_info out;
	const char *bad[] = {
	    "",
	    "[]",
	    "{\"version\":1}",
	    /* not ours: a version, an id, a checksum, a dir we never make */
	    "{\"version\":2,\"id\":\"bkp_1\",\"tenant\":\"\",\"sandboxId\":"
	    "\"a\","
	    "\"dir\":\"/w\",\"excludes\":[],\"sha256\":\"" /* 64 */
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""
	    ","
	    "\"sizeBytes\":1,\"createdMs\":1,\"expiresMs\":0}",
	    "{\"version\":1,\"id\":\"snap_1\",\"tenant\":\"\",\"sandboxId\":"
	    "\"a\","
	    "\"dir\":\"/w\",\"excludes\":[],\"sha256\":\""
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""
	    ","
	    "\"sizeBytes\":1,\"createdMs\":1,\"expiresMs\":0}",
	    "{\"version\":1,\"id\":\"bkp_1\",\"tenant\":\"\",\"sandboxId\":"
	    "\"a\","
	    "\"dir\":\"/w\",\"excludes\":[],\"sha256\":\"xyz\","
	    "\"sizeBytes\":1,\"createdMs\":1,\"expiresMs\":0}",
	    "{\"version\":1,\"id\":\"bkp_1\",\"tenant\":\"\",\"sandboxId\":"
	    "\"a\","
	    "\"dir\":\"w\",\"excludes\":[],\"sha256\":\""
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""
	    ","
	    "\"sizeBytes\":1,\"createdMs\":1,\"expiresMs\":0}",
	    "{\"version\":1,\"id\":\"bkp_1\",\"tenant\":\"\",\"sandboxId\":"
	    "\"a\","
	    "\"dir\":\"/w\",\"excludes\":[1],\"sha256\":\""
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""
	    ","
	    "\"sizeBytes\":1,\"createdMs\":1,\"expiresMs\":0}",
	    "{\"version\":1,\"id\":\"bkp_1\",\"tenant\":\"\",\"sandboxId\":"
	    "\"a\","
	    "\"dir\":\"/w\",\"excludes\":[],\"sha256\":\""
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""
	    ","
	    "\"sizeBytes\":-1,\"createdMs\":1,\"expiresMs\":0}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
		    backup_info_parse(bad[i], strlen(bad[i]), &out), -EINVAL);
}

static void test_tenant_key(void **state)
{
	(void)state;
	char k[64];
	backup_tenant_key("", k, sizeof(k));
	assert_string_equal(k, "t/");
	backup_tenant_key("a/../b", k, sizeof(k));
	assert_string_equal(k, "t612f2e2e2f62/");
}

static void test_credentials(void **state)
{
	(void)state;
	char *k, *s, *t;
	const char *file = "# comment\n"
	                   "[default]\n"
	                   "aws_access_key_id = AKIDEFAULT\n"
	                   "aws_secret_access_key=secret/with+chars=\n"
	                   "\n"
	                   "[profile work]\r\n"
	                   "aws_access_key_id\t=  AKIWORK  \r\n"
	                   "; another comment\n"
	                   "aws_secret_access_key = worksecret\r\n"
	                   "aws_session_token = tok\n"
	                   "[empty]\n"
	                   "aws_access_key_id = onlykey\n";
	assert_int_equal(s3_credentials_parse(file, "default", &k, &s, &t), 0);
	assert_string_equal(k, "AKIDEFAULT");
	assert_string_equal(s, "secret/with+chars=");
	assert_null(t);
	free(k);
	free(s);
	assert_int_equal(s3_credentials_parse(file, "work", &k, &s, &t), 0);
	assert_string_equal(k, "AKIWORK");
	assert_string_equal(s, "worksecret");
	assert_string_equal(t, "tok");
	free(k);
	free(s);
	free(t);
	assert_int_equal(s3_credentials_parse(file, "empty", &k, &s, &t),
	                 -ENOENT);
	assert_null(k);
	assert_int_equal(s3_credentials_parse(file, "none", &k, &s, &t),
	                 -ENOENT);
}

static void test_xml(void **state)
{
	(void)state;
	const char *x =
	    "<?xml version=\"1.0\"?><ListBucketResult>"
	    "<IsTruncated>true</IsTruncated>"
	    "<Contents><Key>p/a&amp;b.json</Key><ETag>&quot;e1&quot;</ETag>"
	    "</Contents><Contents><Key>p/c.json</Key></Contents>"
	    "<NextContinuationToken>tok/+=</NextContinuationToken>"
	    "</ListBucketResult>";
	size_t pos = 0, len = strlen(x);
	char *v = s3_xml_next(x, len, "Key", &pos);
	assert_string_equal(v, "p/a&b.json");
	free(v);
	v = s3_xml_next(x, len, "Key", &pos);
	assert_string_equal(v, "p/c.json");
	free(v);
	assert_null(s3_xml_next(x, len, "Key", &pos));
	pos = 0;
	v = s3_xml_next(x, len, "ETag", &pos);
	assert_string_equal(v, "\"e1\"");
	free(v);
	pos = 0;
	v = s3_xml_next(x, len, "NextContinuationToken", &pos);
	assert_string_equal(v, "tok/+=");
	free(v);
	pos = 0;
	assert_null(s3_xml_next("<Key>unterminated", 17, "Key", &pos));
}

static void test_query(void **state)
{
	(void)state;
	char *q = s3_query_add(NULL, "continuation-token", "a/b+c=");
	q = s3_query_add(q, "list-type", "2");
	q = s3_query_add(q, "prefix", "pre fix/t/");
	assert_string_equal(q, "continuation-token=a%2Fb%2Bc%3D&list-type=2&"
	                       "prefix=pre%20fix%2Ft%2F");
	free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_info_round_trip),
	    cmocka_unit_test(test_info_refuses),
	    cmocka_unit_test(test_tenant_key),
	    cmocka_unit_test(test_credentials),
	    cmocka_unit_test(test_xml),
	    cmocka_unit_test(test_query),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
