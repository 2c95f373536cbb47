/* Sandboxed commands run as uid 0 of their user namespace, so the kernel
 * would hand them a full capability set at every execve. SECBIT_NOROOT
 * (locked) turns that off; the bounding set is emptied so that nothing can
 * bring a capability back, even through a file capability. Order matters:
 * securebits and the bounding set need CAP_SETPCAP, so they go first. All
 * of it is inherited at fork, so the spawner does it once and a command
 * only clears what the spawner kept. */
#include "runtime/caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int last_cap(void)
{
	/* Probe rather than trust the headers: the running kernel may know
	 * more capabilities than the ones we were built against. */
	int c = CAP_LAST_CAP;
	while (prctl(PR_CAPBSET_READ, c + 1, 0, 0, 0) >= 0)
		c++;
	return c;
}

static int set_caps(uint64_t keep)
{
	struct __user_cap_header_struct hdr = {
	    .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2] = {
	    {.permitted = (uint32_t)keep, .effective = (uint32_t)keep},
	    {.permitted = (uint32_t)(keep >> 32),
	     .effective = (uint32_t)(keep >> 32)}};
	return syscall(SYS_capset, &hdr, data) < 0 ? -errno : 0;
}

int caps_clear(void)
{
	return set_caps(0);
}

int caps_limit(uint64_t keep)
{
	if (prctl(PR_SET_SECUREBITS,
	          SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	              SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
	              SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
	              SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
	          0, 0, 0) < 0)
		return -errno;
	int last = last_cap();
	for (int c = 0; c <= last; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return -errno;
	int r = set_caps(keep);
	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}
