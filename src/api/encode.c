/* Encodings every face shares. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/process.h"
#include "lib/util.h"

json_t *json_bytes(const char *data, size_t len)
{
	if (!len)
		return json_string("");
	if (utf8_valid(data, len))
		return json_stringn_nocheck(data, len);
	char *clean = malloc(len * 3 + 1);
	if (!clean)
		return NULL;
	size_t n = utf8_sanitize(data, len, clean);
	json_t *j = json_stringn_nocheck(clean, n);
	free(clean);
	return j;
}

json_t *api_process_json(const struct process *p, unsigned flags)
{
	char st[32], en[32];
	struct process_info pi;
	process_info(p, &pi);
	iso8601_ms(pi.start_ms, st, sizeof(st));
	json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "id", pi.id, "command",
	                      pi.command, "status",
	                      process_status_name(pi.status), "startTime", st);
	if (pi.pid || (flags & API_PROCESS_PID_ALWAYS))
		json_object_set_new(j, "pid", json_integer(pi.pid));
	if (pi.ended) {
		iso8601_ms(pi.end_ms, en, sizeof(en));
		json_object_set_new(j, "endTime", json_string(en));
		json_object_set_new(j, "exitCode", json_integer(pi.exit_code));
		if (pi.error[0] && (flags & API_PROCESS_ERROR))
			json_object_set_new(j, "error", json_string(pi.error));
	}
	return j;
}

unsigned api_status_of(const struct api_code_status *table, size_t n,
                       const char *code)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(table[i].code, code))
			return table[i].status;
	return 500;
}
