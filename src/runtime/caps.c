/* Sandboxed commands run as uid 0 of their user namespace, so the kernel
 * would hand them a full capability set at every execve. SECBIT_NOROOT
 * (locked) turns that off; the bounding set is emptied so that nothing can
 * bring a capability back, even through a file capability. Order matters:
 * securebits and the bounding set need CAP_SETPCAP, so they go first. */
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

/* Becoming another uid needs CAP_SETUID/CAP_SETGID, so it happens here,
 * after the bounding set is gone and before capset empties the rest
 * (SECBIT_NO_SETUID_FIXUP: the change itself clears nothing). */
int caps_drop_all(uid_t uid)
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
	/* the command's user, while CAP_SETUID is still there; the
	 * securebits above keep the capabilities as they are, cleared next */
	if (uid && setresuid(uid, uid, uid) < 0)
		return -errno;
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2] = {{0}, {0}};
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}
