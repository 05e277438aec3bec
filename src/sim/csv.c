#include "base/compat.h"
#include "sim/csv.h"

#include "base/xalloc.h"

#include <errno.h>

size_t csv_split(char *line, char **cols, size_t max)
{
	size_t n = 0;
	char *p = line;

	line[strcspn(line, "\r\n")] = '\0';
	cols[n++] = p;
	while ((p = strchr(p, ',')) && n < max) {
		*p++ = '\0';
		cols[n++] = p;
	}
	return n;
}

int csv_find_col(char **names, size_t n, const char *want)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], want))
			return (int)i;
	return -1;
}

int csv_open(struct csv_reader *r, const char *path, struct errbuf *eb)
{
	memset(r, 0, sizeof(*r));
	r->path = path;
	if (!(r->f = fopen(path, "r")))
		return error(eb, YERR(IO), "cannot open '%s': %s", path, strerror(errno));
	if (getline(&r->line, &r->cap, r->f) < 0) {
		fclose(r->f);
		free(r->line);
		return error(eb, YERR(BAD_REQUEST), "'%s': empty file", path);
	}
	r->lineno = 1;
	r->header = xstrdup(r->line);
	r->nnames = csv_split(r->header, r->names, CSV_MAX_COLS);
	return 0;
}

void csv_close(struct csv_reader *r)
{
	if (r->f)
		fclose(r->f);
	free(r->line);
	free(r->header);
	memset(r, 0, sizeof(*r));
}

int csv_col(struct csv_reader *r, const char *name, struct errbuf *eb)
{
	int c = csv_find_col(r->names, r->nnames, name);

	if (c < 0)
		return error(eb, YERR(BAD_REQUEST), "'%s': the header lacks the column '%s'", r->path,
			     name);
	return c;
}

int csv_next(struct csv_reader *r, char **cols, struct errbuf *eb)
{
	while (getline(&r->line, &r->cap, r->f) >= 0) {
		size_t n;

		r->lineno++;
		if (r->line[strspn(r->line, "\r\n")] == '\0')
			continue;
		n = csv_split(r->line, cols, CSV_MAX_COLS);
		if (n < r->nnames)
			return error(eb, YERR(BAD_REQUEST), "'%s' line %zu: %zu fields, expected %zu",
				     r->path, r->lineno, n, r->nnames);
		return 1;
	}
	if (ferror(r->f))
		return error(eb, YERR(IO), "cannot read '%s': %s", r->path, strerror(errno));
	return 0;
}
