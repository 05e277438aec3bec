#include "base/compat.h"
#include "sim/csv.h"

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
