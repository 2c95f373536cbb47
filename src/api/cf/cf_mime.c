/* The Cloudflare face's MIME types: what a file is, from its name or
 * its first bytes, and whether the protocol sends it as text or base64.
 * Pure; unit-tested in tests/unit/test_cf_mime.c. */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "api/cf/cf.h"
#include "lib/util.h"

static const struct {
	const char *ext, *mime;
} mimes[] = {
    {"txt", "text/plain"},
    {"text", "text/plain"},
    {"log", "text/plain"},
    {"md", "text/markdown"},
    {"markdown", "text/markdown"},
    {"html", "text/html"},
    {"htm", "text/html"},
    {"css", "text/css"},
    {"csv", "text/csv"},
    {"tsv", "text/tab-separated-values"},
    {"js", "text/javascript"},
    {"mjs", "text/javascript"},
    {"cjs", "text/javascript"},
    {"jsx", "text/javascript"},
    {"ts", "application/typescript"},
    {"tsx", "application/typescript"},
    {"mts", "application/typescript"},
    {"cts", "application/typescript"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"xml", "application/xml"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"toml", "application/toml"},
    {"sh", "application/x-sh"},
    {"bash", "application/x-sh"},
    {"sql", "application/sql"},
    {"rtf", "application/rtf"},
    {"php", "application/x-httpd-php"},
    {"py", "text/x-python"},
    {"rb", "text/x-ruby"},
    {"go", "text/x-go"},
    {"rs", "text/x-rust"},
    {"c", "text/x-c"},
    {"h", "text/x-c"},
    {"cc", "text/x-c++"},
    {"cpp", "text/x-c++"},
    {"hpp", "text/x-c++"},
    {"java", "text/x-java"},
    {"kt", "text/x-kotlin"},
    {"swift", "text/x-swift"},
    {"ini", "text/plain"},
    {"cfg", "text/plain"},
    {"conf", "text/plain"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"bmp", "image/bmp"},
    {"ico", "image/x-icon"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"avif", "image/avif"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tgz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"bz2", "application/x-bzip2"},
    {"xz", "application/x-xz"},
    {"7z", "application/x-7z-compressed"},
    {"wasm", "application/wasm"},
    {"bin", "application/octet-stream"},
    {"exe", "application/octet-stream"},
    {"so", "application/octet-stream"},
    {"o", "application/octet-stream"},
    {"a", "application/octet-stream"},
    {"mp3", "audio/mpeg"},
    {"wav", "audio/wav"},
    {"ogg", "audio/ogg"},
    {"flac", "audio/flac"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mov", "video/quicktime"},
    {"avi", "video/x-msvideo"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"sqlite", "application/vnd.sqlite3"},
    {"db", "application/octet-stream"},
};

/* MIME types the container reads as text besides text/ and +json/+xml. */
static const char *const text_mimes[] = {
    "application/ecmascript",    "application/javascript",
    "application/json",          "application/json-seq",
    "application/rtf",           "application/sql",
    "application/toml",          "application/typescript",
    "application/x-empty",       "application/x-httpd-php",
    "application/x-javascript",  "application/x-sh",
    "application/x-shellscript", "application/x-typescript",
    "application/x-yaml",        "application/xml",
    "application/xml-dtd",       "application/xml-external-parsed-entity",
    "application/yaml",          "inode/x-empty",
};

bool cf_mime_binary(const char *mime)
{
	size_t l = strlen(mime);
	if (!strncmp(mime, "text/", 5) ||
	    (l > 5 &&
	     (!strcmp(mime + l - 5, "+json") || !strcmp(mime + l - 4, "+xml"))))
		return false;
	for (size_t i = 0; i < sizeof(text_mimes) / sizeof(text_mimes[0]); i++)
		if (!strcmp(mime, text_mimes[i]))
			return false;
	return true;
}

static bool starts(const unsigned char *p, size_t n, const char *magic,
                   size_t ml)
{
	return n >= ml && !memcmp(p, magic, ml);
}

/* The type of a file named path whose first n bytes are p (all of it when
 * complete). */
const char *cf_mime_of(const char *path, const char *data, size_t n,
                       bool complete)
{
	const unsigned char *p = (const unsigned char *)data;
	const char *base = strrchr(path, '/');
	const char *dot = strrchr(base ? base + 1 : path, '.');
	if (dot && dot[1] && dot != (base ? base + 1 : path))
		for (size_t i = 0; i < sizeof(mimes) / sizeof(mimes[0]); i++)
			if (!strcasecmp(dot + 1, mimes[i].ext))
				return mimes[i].mime;
	if (!n)
		return complete ? "inode/x-empty" : "application/octet-stream";
	if (starts(p, n, "\x89PNG\r\n\x1a\n", 8))
		return "image/png";
	if (starts(p, n, "\xff\xd8\xff", 3))
		return "image/jpeg";
	if (starts(p, n, "GIF87a", 6) || starts(p, n, "GIF89a", 6))
		return "image/gif";
	if (starts(p, n, "%PDF-", 5))
		return "application/pdf";
	if (starts(p, n, "PK\x03\x04", 4))
		return "application/zip";
	if (starts(p, n, "\x1f\x8b", 2))
		return "application/gzip";
	if (starts(p, n,
	           "\x7f"
	           "ELF",
	           4))
		return "application/x-executable";
	if (starts(p, n, "\0asm", 4))
		return "application/wasm";
	if (n >= 12 && starts(p, n, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
		return "image/webp";
	/* text: UTF-8 without NUL (a sequence cut by the sniff window is
	 * not held against it) */
	size_t check = n;
	for (size_t back = 1; !complete && back <= 3 && back <= n; back++)
		if ((p[n - back] & 0xc0) != 0x80) {
			if (p[n - back] >= 0xc0)
				check = n - back;
			break;
		}
	return utf8_valid(data, check) ? "text/plain"
	                               : "application/octet-stream";
}
