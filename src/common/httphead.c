/* HTTP/1.x response heads (httphead.h). */
#include "base/compat.h"
#include "common/httphead.h"

#include "base/xalloc.h"

size_t http_head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* A token character of a field name (RFC 9110, 5.6.2). */
static bool tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The next line of [*p, end): its bytes without the CR LF into *line and
 * *n; false at the end. */
static bool next_line(const char **p, const char *end, const char **line, size_t *n)
{
	const char *nl;

	if (*p >= end)
		return false;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	*line = *p;
	*n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
	*p = nl ? nl + 1 : end;
	if (*n && (*line)[*n - 1] == '\r')
		(*n)--;
	return true;
}

static bool has_ctl(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return true;
	}
	return false;
}

int http_response_head_parse(const char *buf, size_t len, struct http_head *h, struct errbuf *eb)
{
	const char *p = buf, *end = buf + len, *line;
	size_t n, alloc = 0;

	memset(h, 0, sizeof(*h));
	if (!next_line(&p, end, &line, &n) || n < 12 || strncmp(line, "HTTP/1.", 7) ||
	    line[7] < '0' || line[7] > '9' || line[8] != ' ')
		return error(eb, YERR(BAD_REQUEST), "the answer is not an HTTP/1.x response");
	h->minor = line[7] - '0';
	for (int i = 9; i < 12; i++)
		if (line[i] < '0' || line[i] > '9')
			return error(eb, YERR(BAD_REQUEST), "the answer's status '%.3s' is not three "
				     "digits", line + 9);
	h->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
	if (h->status < 100 || (n > 12 && line[12] != ' '))
		return error(eb, YERR(BAD_REQUEST), "the answer's status line is malformed");
	if (has_ctl(line, n))
		return error(eb, YERR(BAD_REQUEST), "the answer's status line holds a control character");
	h->reason = xstrndup(n > 13 ? line + 13 : "", n > 13 ? n - 13 : 0);
	while (next_line(&p, end, &line, &n) && n) {
		const char *colon = memchr(line, ':', n), *v, *ve;
		size_t k;
		if (line[0] == ' ' || line[0] == '\t')
			return error(eb, YERR(BAD_REQUEST), "the answer has a folded field line");
		if (!colon || colon == line)
			return error(eb, YERR(BAD_REQUEST), "the answer has a field line without a name "
				     "and a colon");
		for (k = 0; line + k < colon; k++)
			if (!tchar((unsigned char)line[k]))
				return error(eb, YERR(BAD_REQUEST), "the answer has a field name with "
					     "byte 0x%02x", (unsigned char)line[k]);
		if (has_ctl(colon + 1, (size_t)(line + n - colon - 1)))
			return error(eb, YERR(BAD_REQUEST), "the answer's field '%.*s' holds a control "
				     "character", (int)k, line);
		if (h->nfields >= HTTP_HEAD_FIELDS_MAX)
			return error(eb, YERR(BAD_REQUEST), "the answer has more than %d fields",
				     HTTP_HEAD_FIELDS_MAX);
		for (v = colon + 1; v < line + n && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = line + n; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
			;
		ALLOC_GROW(h->fields, h->nfields + 1, alloc);
		h->fields[h->nfields].name = xstrndup(line, k);
		h->fields[h->nfields].value = xstrndup(v, (size_t)(ve - v));
		h->nfields++;
	}
	return 0;
}

const char *http_head_get(const struct http_head *h, const char *name)
{
	for (size_t i = 0; i < h->nfields; i++)
		if (!strcasecmp(h->fields[i].name, name))
			return h->fields[i].value;
	return NULL;
}

bool http_list_has_token(const char *list, const char *token)
{
	size_t tlen = strlen(token);

	for (const char *p = list; p && *p;) {
		size_t n;
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		n = strcspn(p, ",");
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n == tlen && !strncasecmp(p, token, tlen))
			return true;
		p += strcspn(p, ",");
	}
	return false;
}

bool http_head_has_token(const struct http_head *h, const char *name, const char *token)
{
	for (size_t i = 0; i < h->nfields; i++)
		if (!strcasecmp(h->fields[i].name, name) && http_list_has_token(h->fields[i].value, token))
			return true;
	return false;
}

void http_head_release(struct http_head *h)
{
	for (size_t i = 0; i < h->nfields; i++) {
		free(h->fields[i].name);
		free(h->fields[i].value);
	}
	free(h->fields);
	free(h->reason);
	memset(h, 0, sizeof(*h));
}
