/* The web console's files, from the binary (ui_blob.S). The pages talk to
 * /v1 with the user's token (fetch) and open terminals with tickets, so
 * this face needs no authentication of its own: its files are the same
 * for everyone. The Content-Security-Policy keeps the console to its own
 * files and to this daemon (no CDN, nothing from elsewhere); xterm.js's
 * DOM renderer sets styles at run time, hence 'unsafe-inline' for styles
 * only. */
#include "api/ui/ui.h"

#include <stdlib.h>
#include <string.h>

#define UI_FILE(sym)                                                           \
	extern const char sym[];                                               \
	extern const char sym##_end[];
UI_FILE(sbx_ui_index_html)
UI_FILE(sbx_ui_app_js)
UI_FILE(sbx_ui_app_css)
UI_FILE(sbx_ui_xterm_js)
UI_FILE(sbx_ui_xterm_css)
UI_FILE(sbx_ui_addon_fit_js)

static const struct ui_file {
	const char *name, *type;
	const char *start, *end;
} files[] = {
    {"index.html", "text/html; charset=utf-8", sbx_ui_index_html,
     sbx_ui_index_html_end},
    {"app.js", "text/javascript; charset=utf-8", sbx_ui_app_js,
     sbx_ui_app_js_end},
    {"app.css", "text/css; charset=utf-8", sbx_ui_app_css, sbx_ui_app_css_end},
    {"xterm.js", "text/javascript; charset=utf-8", sbx_ui_xterm_js,
     sbx_ui_xterm_js_end},
    {"xterm.css", "text/css; charset=utf-8", sbx_ui_xterm_css,
     sbx_ui_xterm_css_end},
    {"addon-fit.js", "text/javascript; charset=utf-8", sbx_ui_addon_fit_js,
     sbx_ui_addon_fit_js_end},
};

static const char *const headers[] = {
    "Content-Security-Policy",
    "default-src 'none'; script-src 'self'; style-src 'self' "
    "'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options",
    "nosniff",
    "Referrer-Policy",
    "no-referrer",
    "Cache-Control",
    "no-cache",
    NULL};

void api_ui_handle(struct http_req *r)
{
	const char *rest = r->url + 3; /* after "/ui" */
	if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD")) {
		http_respond_json(
		    r, 405, json_pack("{s:s}", "error", "method not allowed"));
		return;
	}
	if (!*rest) { /* "/ui": the console is "/ui/" (relative links) */
		struct http_stream *s = http_respond_stream(
		    r, 308, "text/plain; charset=utf-8", 0,
		    (const char *const[]){"Location", "/ui/", NULL});
		if (s)
			http_stream_end(s);
		return;
	}
	const char *name = rest + 1;
	if (!*name)
		name = "index.html";
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (strcmp(files[i].name, name))
			continue;
		size_t len = (size_t)(files[i].end - files[i].start);
		struct http_stream *s =
		    http_respond_stream(r, 200, files[i].type, len, headers);
		if (!s)
			return;
		http_stream_write(s, files[i].start, len);
		http_stream_end(s);
		return;
	}
	http_respond_text(r, 404, "404 page not found\n");
}
