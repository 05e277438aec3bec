/*
 * The small CSV reading the simulator's inputs need: comma-separated fields
 * without quoting, a header line naming the columns. Shared by the trace
 * readers (trace.c) and the Pollux profiles (pollux.c), row by row with
 * struct csv_reader or line by line with csv_split.
 */
#ifndef YARD_SIM_CSV_H
#define YARD_SIM_CSV_H

#include <stddef.h>
#include <stdio.h>

#include "base/error.h"

#define CSV_MAX_COLS 32

/* csv_split cuts line (modified in place; its line end dropped) at commas
 * into at most max fields, pointed at from cols (OUT). Returns the count. */
size_t csv_split(char *line, char **cols, size_t max);
/* csv_find_col: the index of the column named want among names[0..n), or -1. */
int csv_find_col(char **names, size_t n, const char *want);

/* A CSV file being read row by row, its columns looked up by name. */
struct csv_reader {
	const char *path;
	FILE *f;
	char *line, *header;
	size_t cap, lineno;
	char *names[CSV_MAX_COLS];
	size_t nnames;
};

/* csv_open opens path and reads its header line (an empty file is refused);
 * csv_close releases what it holds. */
int csv_open(struct csv_reader *r, const char *path, struct errbuf *eb);
void csv_close(struct csv_reader *r);
/* csv_col: the index of the column name, or negative with eb naming it. */
int csv_col(struct csv_reader *r, const char *name, struct errbuf *eb);
/* csv_next: the next non-empty row into cols (which point into r's buffer):
 * 1, 0 at the end, negative with eb set. A row must have every header
 * column; r->lineno is its line. */
int csv_next(struct csv_reader *r, char **cols, struct errbuf *eb);

#endif
