/*
 * Functions that are easy to misuse are banned at compile time: a call to one
 * of them fails to build. Use strbuf, snprintf, parse_*, the *_r time
 * functions and sort_array (compat.h) instead. Included (by meson's -include) in every file of the project.
 */
#ifndef YARD_BANNED_H
#define YARD_BANNED_H

#define BANNED(func) sorry_##func##_is_banned_in_yard

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) BANNED(strncpy)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef strtok
#define strtok(x, y) BANNED(strtok)
#undef atoi
#define atoi(x) BANNED(atoi)
#undef gmtime
#define gmtime(t) BANNED(gmtime)
#undef localtime
#define localtime(t) BANNED(localtime)
#undef mktemp
#define mktemp(x) BANNED(mktemp)
#undef qsort
#define qsort(b, n, s, c) BANNED(qsort)

#endif
