/*
 * libxml2, loaded at its first use (dlopen): only an S3 listing is XML,
 * and libxml2 maps ICU and libstdc++ with it, 1.8 MiB of an idle agent's
 * RSS (docs/design-notes.md, "An agent as small as slurmd"). The table's
 * members are libxml2's own functions, with their own prototypes:
 * xl->xmlReadMemory(...) is xmlReadMemory(...). xmlFree is a variable in
 * libxml2 (a pointer to its free function), so its member points to that
 * variable: (*xl->xmlFree)(p).
 */
#ifndef YARD_XMLLIB_H
#define YARD_XMLLIB_H

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "base/error.h"

/* The shared object the Debian package libxml2 installs. */
#define XMLLIB_SONAME "libxml2.so.2"

#define XMLLIB_FUNCS(X) X(xmlDocGetRootElement) X(xmlFree) X(xmlFreeDoc) X(xmlNodeGetContent) X(xmlReadMemory)

struct xmllib {
#define XMLLIB_MEMBER(f) __typeof__(f) *f;
	XMLLIB_FUNCS(XMLLIB_MEMBER)
#undef XMLLIB_MEMBER
};

/* xmllib_load: the library, loaded once (thread-safe); NULL with eb naming
 * the library and why when it cannot be loaded. */
const struct xmllib *xmllib_load(struct errbuf *eb);

#endif
