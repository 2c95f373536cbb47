/* Host-wide uid range reservations (runtime/uidrange.c): two holders of
 * the lock file (two open file descriptions, as two daemons have) never
 * hold overlapping ranges; a holder's own ranges never conflict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/uidrange.h"
#include "runtime/userns.h"

static char dir[] = "/tmp/sbx-uidrange-XXXXXX";
static char path[64];

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	/* a directory of its own that uidrange_open makes */
	snprintf(path, sizeof(path), "%s/run/uid-ranges.lock", dir);
	return 0;
}

static int teardown(void **state)
{
	char sub[64];
	(void)state;
	unlink(path);
	snprintf(sub, sizeof(sub), "%s/run", dir);
	rmdir(sub);
	rmdir(dir);
	return 0;
}

static void test_two_daemons(void **state)
{
	(void)state;
	struct sbx_err err;
	struct uidrange *a, *b;
	uid_t base = 1879048192u;
	assert_int_equal(uidrange_open(path, &a, &err), 0);
	assert_int_equal(uidrange_open(path, &b, &err), 0);
	assert_int_equal(uidrange_claim(a, base), 0);
	assert_int_equal(uidrange_claim(a, base), 0); /* its own: again */
	assert_int_equal(uidrange_claim(a, base + USERNS_RANGE), 0);
	assert_int_equal(uidrange_claim(b, base), -EBUSY);
	assert_int_equal(uidrange_claim(b, base + USERNS_RANGE), -EBUSY);
	/* any overlap, also of an unaligned range */
	assert_int_equal(uidrange_claim(b, base + 2 * USERNS_RANGE - 1),
	                 -EBUSY);
	assert_int_equal(uidrange_claim(b, base - USERNS_RANGE + 1), -EBUSY);
	/* adjacent ranges are free */
	assert_int_equal(uidrange_claim(b, base + 2 * USERNS_RANGE), 0);
	assert_int_equal(uidrange_claim(b, base - USERNS_RANGE), 0);
	/* a release frees exactly that range */
	uidrange_release(a, base);
	assert_int_equal(uidrange_claim(b, base), 0);
	assert_int_equal(uidrange_claim(b, base + USERNS_RANGE), -EBUSY);
	/* a holder that goes (a daemon that exits, however) frees all */
	uidrange_free(a);
	assert_int_equal(uidrange_claim(b, base + USERNS_RANGE), 0);
	/* ranges above 2^31 are byte offsets like any other */
	assert_int_equal(uidrange_claim(b, 0xFFFE0000u), 0);
	assert_int_equal(uidrange_open(path, &a, &err), 0);
	assert_int_equal(uidrange_claim(a, 0xFFFE0000u), -EBUSY);
	uidrange_free(a);
	uidrange_free(b);
}

static void test_reserved_ranges(void **state)
{
	(void)state;
	/* systemd's foreign range, 0x7FFE0000..0x7FFEFFFF */
	assert_true(uidrange_reserved(0x7FFE0000u));
	assert_true(uidrange_reserved(0x7FFE0000u - 1));
	assert_true(uidrange_reserved(0x7FFEFFFFu));
	assert_false(uidrange_reserved(0x7FFD0000u));
	assert_false(uidrange_reserved(0x7FFF0000u));
	/* systemd-nspawn's container range, 524288..1879048191 */
	assert_true(uidrange_in_container_range(524288));
	assert_true(uidrange_in_container_range(1879048191u - 65535));
	assert_true(uidrange_in_container_range(1u << 30));
	assert_false(uidrange_in_container_range(1879048192u));
	assert_false(uidrange_in_container_range(524288 - 65536));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_daemons),
	    cmocka_unit_test(test_reserved_ranges),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
