#include "base/compat.h"
#include "base/utf8.h"

#include "base/strbuf.h"

size_t utf8_seq_len(const unsigned char *s, size_t len)
{
	unsigned char c = s[0];
	size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;

	if (!n || n > len || (n == 2 && c < 0xc2))
		return 0;
	for (size_t k = 1; k < n; k++)
		if ((s[k] & 0xc0) != 0x80)
			return 0;
	/* no overlong three- and four-byte forms, no surrogates, nothing past U+10FFFF */
	if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0)))
		return 0;
	if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90) || c > 0xf4))
		return 0;
	return n;
}

bool utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0, n; i < len; i += n)
		if (!(n = utf8_seq_len(p + i, len - i)))
			return false;
	return true;
}

/* The bytes one unit of s at i becomes (a character, or an escape of one
 * byte) in out (at least 5 bytes); returns how many input bytes it took. */
static size_t escape_unit(const unsigned char *s, size_t len, char out[5], size_t *outlen)
{
	size_t n = utf8_seq_len(s, len);

	if (n && !(n == 1 && (s[0] < 0x20 || s[0] == 0x7f))) {
		memcpy(out, s, n);
		*outlen = n;
		return n;
	}
	snprintf(out, 5, "\\x%02X", s[0]);
	*outlen = 4;
	return 1;
}

void utf8_escape_append(struct strbuf *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	char unit[5];
	size_t ulen;

	for (size_t i = 0; i < len;) {
		i += escape_unit(p + i, len - i, unit, &ulen);
		strbuf_add(out, unit, ulen);
	}
}

char *utf8_escape_dup(const char *s)
{
	struct strbuf sb = STRBUF_INIT;

	utf8_escape_append(&sb, s, strlen(s));
	return strbuf_detach(&sb, NULL);
}

void utf8_escape_into(char *dst, size_t cap, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), w = 0;
	char unit[5];
	size_t ulen;

	for (size_t i = 0; i < len;) {
		i += escape_unit(p + i, len - i, unit, &ulen);
		if (w + ulen >= cap)
			break;
		memcpy(dst + w, unit, ulen);
		w += ulen;
	}
	dst[w] = '\0';
}

void utf8_lossy_append(struct strbuf *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0, n; i < len; i += n ? n : 1) {
		if ((n = utf8_seq_len(p + i, len - i)))
			strbuf_add(out, p + i, n);
		else
			strbuf_addstr(out, "\xef\xbf\xbd");
	}
}
