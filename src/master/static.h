/*
 * The web app's static files, served at / next to the API: GET and HEAD of
 * any path outside /v1 that no route takes. No token is needed (the files
 * hold no data; the app asks the API with the user's token).
 *
 * A path is decoded here, from the raw request target, so that an encoded
 * "%2e%2e" or "%00" is refused like a plain ".." (400), never resolved.
 * Only regular files are served; a directory, or a path that names nothing,
 * answers index.html (the app routes on the client), except under /assets/,
 * where a missing file is a 404 rather than HTML where a script was wanted.
 * index.html and other unhashed files go out with Cache-Control: no-cache;
 * the hashed files under /assets/ are cached for a year.
 *
 * Without a web dir (or without its index.html) every static path answers
 * a short HTML page saying that the UI is not built, with 200.
 */
#ifndef YARD_MASTER_STATIC_H
#define YARD_MASTER_STATIC_H

#include <stdbool.h>

struct req;

/* static_default_dir returns "<directory of the running binary>/web" when
 * that is a directory (build/web next to build/yard), else YARD_WEB_DIR (the
 * installed app, PREFIX/share/yard/web: /usr/share/yard/web in the Debian
 * package) when that is one, else NULL. Caller frees. */
char *static_default_dir(void);

/* static_takes says whether a request that matched no route is the static
 * server's: GET or HEAD, and a path that is neither /v1 nor under /v1/. */
bool static_takes(const char *method, const char *path);

/* static_resolve decodes the path of a raw request target (up to '?' or
 * '#'; %XX escapes) into a path relative to the web dir, without a leading
 * '/': "" for "/", "assets/a.js" for "/assets/a.js". Returns 0 and sets
 * *out (caller frees), or -1 (nothing set) for a target that does not start
 * with '/', a bad escape, a NUL or backslash, or a "." or ".." segment. */
int static_resolve(const char *target, char **out);

/* static_mime is the Content-Type for a file name, by its extension;
 * application/octet-stream when unknown. */
const char *static_mime(const char *name);

/* static_serve sets r's reply for a request static_takes: the file, the
 * index.html fallback, the "not built" page, or an error. raw_target is the
 * request target as it came (before MHD decoded it); web_dir may be NULL. */
void static_serve(struct req *r, const char *web_dir, const char *raw_target);

#endif
