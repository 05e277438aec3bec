/*
 * The small CSV reading the simulator's inputs need: comma-separated fields
 * without quoting, a header line naming the columns. Shared by the trace
 * readers (trace.c) and the Pollux profiles (pollux.c).
 */
#ifndef YARD_SIM_CSV_H
#define YARD_SIM_CSV_H

#include <stddef.h>

#define CSV_MAX_COLS 32

/* csv_split cuts line (modified in place; its line end dropped) at commas
 * into at most max fields, pointed at from cols (OUT). Returns the count. */
size_t csv_split(char *line, char **cols, size_t max);
/* csv_find_col: the index of the column named want among names[0..n), or -1. */
int csv_find_col(char **names, size_t n, const char *want);

#endif
