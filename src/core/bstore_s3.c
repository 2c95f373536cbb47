#include "core/bstore.h"
#include "core/config.h"

int backup_s3_store(const struct config *cfg, struct loop *loop,
		    struct bstore **out, struct sbx_err *err)
{
	(void)cfg;
	(void)loop;
	(void)out;
	return sbx_err_set(err, ENOTSUP, "S3 backups are not built yet");
}
