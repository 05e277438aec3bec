#include "base/compat.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

#include <ctype.h>

char strbuf_slopbuf[1];

void strbuf_init(struct strbuf *sb, size_t hint)
{
	sb->alloc = sb->len = 0;
	sb->buf = strbuf_slopbuf;
	if (hint)
		strbuf_grow(sb, hint);
}

void strbuf_release(struct strbuf *sb)
{
	if (sb->alloc)
		free(sb->buf);
	strbuf_init(sb, 0);
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
	char *res;
	strbuf_grow(sb, 0);
	res = sb->buf;
	if (len)
		*len = sb->len;
	strbuf_init(sb, 0);
	return res;
}

void strbuf_grow(struct strbuf *sb, size_t extra)
{
	int fresh = !sb->alloc;
	size_t need = sb->len + extra + 1;
	if (need < sb->len) {
		fprintf(stderr, "yard: strbuf overflow\n");
		abort();
	}
	if (fresh)
		sb->buf = NULL;
	ALLOC_GROW(sb->buf, need, sb->alloc);
	if (fresh)
		sb->buf[0] = '\0';
}

void strbuf_setlen(struct strbuf *sb, size_t len)
{
	assert(len <= (sb->alloc ? sb->alloc - 1 : 0));
	sb->len = len;
	if (sb->alloc)
		sb->buf[len] = '\0';
}

void strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
	if (!len)
		return;
	strbuf_grow(sb, len);
	memcpy(sb->buf + sb->len, data, len);
	strbuf_setlen(sb, sb->len + len);
}

void strbuf_addstr(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

void strbuf_addch(struct strbuf *sb, int c)
{
	strbuf_grow(sb, 1);
	sb->buf[sb->len] = (char)c;
	strbuf_setlen(sb, sb->len + 1);
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	int n;
	strbuf_grow(sb, 64);
	va_copy(cp, ap);
	n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, cp);
	va_end(cp);
	if (n < 0) {
		fprintf(stderr, "yard: bad format string '%s'\n", fmt);
		abort();
	}
	if ((size_t)n >= sb->alloc - sb->len) {
		strbuf_grow(sb, (size_t)n);
		n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, ap);
	}
	strbuf_setlen(sb, sb->len + (size_t)n);
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

int strbuf_add_capped(struct strbuf *sb, const void *data, size_t len, size_t max)
{
	if (len > max || sb->len > max - len)
		return -1;
	strbuf_add(sb, data, len);
	return 0;
}

void strbuf_trim(struct strbuf *sb)
{
	size_t start = 0, end = sb->len;
	while (end > 0 && isspace((unsigned char)sb->buf[end - 1]))
		end--;
	while (start < end && isspace((unsigned char)sb->buf[start]))
		start++;
	if (start)
		memmove(sb->buf, sb->buf + start, end - start);
	if (sb->alloc)
		strbuf_setlen(sb, end - start);
}

int strbuf_read_fd(struct strbuf *sb, int fd)
{
	for (;;) {
		ssize_t n;
		strbuf_grow(sb, 8192);
		n = read(fd, sb->buf + sb->len, sb->alloc - sb->len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			return 0;
		strbuf_setlen(sb, sb->len + (size_t)n);
	}
}

int strbuf_read_file(struct strbuf *sb, const char *path, size_t max)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret;
	if (fd < 0)
		return -1;
	if (max && fstat(fd, &st) == 0 && (size_t)st.st_size > max) {
		close(fd);
		errno = EFBIG;
		return -1;
	}
	ret = strbuf_read_fd(sb, fd);
	int saved = errno;
	close(fd);
	errno = saved;
	return ret;
}
