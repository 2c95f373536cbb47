/* See uidrange.h. Why OFD locks on one file rather than a lock file per
 * range or /etc/subuid entries:
 *   - they belong to the open file description, not the process, so the
 *     daemon's forks (init, cleaners) neither hold nor drop them; they go
 *     when the daemon's fd closes, at exit or crash, so nothing is ever
 *     left to clean up (an /etc/subuid entry, or a per-range file, would
 *     outlive a killed daemon and need a liveness check of its own);
 *   - one fd holds every range of the daemon, so 10,000 sandboxes cost no
 *     fds (flock needs one open file per range);
 *   - a byte range is an exact uid range: two daemons with different,
 *     unaligned bases still conflict on exactly the uids they share.
 * The file is root's (0600 in a 0755 root directory): no other user can
 * open it, so none can take or hold a range. */
#include "runtime/uidrange.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/userns.h"

struct uidrange {
	int fd;
};

int uidrange_open(const char *path, struct uidrange **out, struct sbx_err *err)
{
	char dir[4096];
	size_t l = strlen(path);
	const char *slash = strrchr(path, '/');
	if (!slash || l >= sizeof(dir))
		return sbx_err_set(err, EINVAL, "uid range lock %s: bad path",
		                   path);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	if (dir[0] && mkdir(dir, 0755) < 0 && errno != EEXIST)
		return sbx_err_sys(err, errno, "mkdir %s", dir);
	struct uidrange *ur = calloc(1, sizeof(*ur));
	if (!ur)
		return sbx_err_set(err, ENOMEM, "out of memory");
	ur->fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ur->fd < 0) {
		int r = sbx_err_sys(err, errno, "open %s", path);
		free(ur);
		return r;
	}
	*out = ur;
	return 0;
}

void uidrange_free(struct uidrange *ur)
{
	if (!ur)
		return;
	close(ur->fd);
	free(ur);
}

static int set_lock(struct uidrange *ur, short type, uid_t first)
{
	struct flock fl = {.l_type = type,
	                   .l_whence = SEEK_SET,
	                   .l_start = (off_t)first,
	                   .l_len = USERNS_RANGE};
	if (fcntl(ur->fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	return errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
}

int uidrange_claim(struct uidrange *ur, uid_t first)
{
	return set_lock(ur, F_WRLCK, first);
}

void uidrange_release(struct uidrange *ur, uid_t first)
{
	set_lock(ur, F_UNLCK, first);
}

static bool overlaps(uid_t first, uint64_t lo, uint64_t hi)
{
	uint64_t a = first, b = (uint64_t)first + USERNS_RANGE - 1;
	return a <= hi && b >= lo;
}

bool uidrange_reserved(uid_t first)
{
	return overlaps(first, 0x7FFE0000u, 0x7FFEFFFFu);
}

bool uidrange_in_container_range(uid_t first)
{
	return overlaps(first, 0x00080000u, 0x6FFFFFFFu);
}
