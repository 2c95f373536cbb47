/* Dropping every privilege a sandboxed command could hold in its user
 * namespace, right before exec. */
#ifndef SBX_CAPS_H
#define SBX_CAPS_H

/* Clear the bounding, ambient, inheritable, permitted and effective sets,
 * lock the securebits so that uid 0 gains nothing at execve, and set
 * no_new_privs. Returns 0 or -errno. Async-signal-safe (runs after fork). */
int caps_drop_all(void);
/* The same, ending as uid and gid id of the namespace (0: stay root). */
int caps_drop_all_as(unsigned id);

#endif
