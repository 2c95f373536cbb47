/* The web console at /ui/ (ui/ in the tree): static files embedded in the
 * binary at build time; the daemon serves no file from outside itself. */
#ifndef SBX_API_UI_H
#define SBX_API_UI_H

#include "http/http.h"

/* GET (or HEAD) /ui and everything under it. */
void api_ui_handle(struct http_req *r);

#endif
