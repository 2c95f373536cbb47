/* Host-wide reservation of sandbox uid ranges, so that two daemons on one
 * host never give their sandboxes the same host uids (isolation.md A.9).
 *
 * One lock file for the whole host (UIDRANGE_LOCK_PATH); a range of host
 * uids [first, first + USERNS_RANGE) is held by an open file description
 * lock (F_OFD_SETLK) on the same bytes of that file. The kernel drops a
 * daemon's locks when it exits, however it exits, so a reservation can
 * never go stale; one fd holds any number of ranges. */
#ifndef SBX_UIDRANGE_H
#define SBX_UIDRANGE_H

#include <stdbool.h>
#include <sys/types.h>

#include "lib/err.h"

#define UIDRANGE_LOCK_PATH "/run/sandboxd/uid-ranges.lock"

struct uidrange;

/* Open (creating it and its directory, root-only) the lock file. */
int uidrange_open(const char *path, struct uidrange **out, struct sbx_err *err);
void uidrange_free(struct uidrange *ur);

/* Reserve the range that starts at first: 0, -EBUSY when another process
 * (another daemon) holds any uid of it, or -errno. Reserving a range this
 * process holds already succeeds. */
int uidrange_claim(struct uidrange *ur, uid_t first);
/* Give it back. */
void uidrange_release(struct uidrange *ur, uid_t first);

/* Whether [first, first + USERNS_RANGE) overlaps a range that another
 * tool allocates by convention and sandboxd must never take: systemd's
 * "foreign" uid range (0x7FFE0000, images owned by no local user). */
bool uidrange_reserved(uid_t first);
/* Whether it overlaps systemd-nspawn's and nsresourced's container range
 * (524288..1879048191): allowed, but worth a warning. */
bool uidrange_in_container_range(uid_t first);

#endif
