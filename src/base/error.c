#include "base/compat.h"
#include "base/error.h"

#include <errno.h>

#include "base/utf8.h"

static const char *const codes[] = {
#define X_(name, code, status, msg) code,
	YARD_ERRORS(X_)
#undef X_
};
static const int statuses[] = {
#define X_(name, code, status, msg) status,
	YARD_ERRORS(X_)
#undef X_
};
static const char *const messages[] = {
#define X_(name, code, status, msg) msg,
	YARD_ERRORS(X_)
#undef X_
};
static_assert(ARRAY_SIZE(codes) == YERR__COUNT, "codes must mirror YARD_ERRORS");
static_assert(ARRAY_SIZE(statuses) == YERR__COUNT, "statuses must mirror YARD_ERRORS");

static int index_of(int err)
{
	int i = -err - 1;
	return (i >= 0 && i < YERR__COUNT) ? i : YERR_IDX_INTERNAL;
}

const char *yerr_code_str(int err)
{
	return codes[index_of(err)];
}

int yerr_of_errno(int e)
{
	return e == ENOSPC || e == EDQUOT || e == EROFS ? YERR(NO_SPACE) : YERR(IO);
}

int yerr_from_code_str(const char *code)
{
	for (size_t i = 0; code && i < ARRAY_SIZE(codes); i++)
		if (!strcmp(code, codes[i]))
			return -(int)i - 1;
	return YERR(INTERNAL);
}

int yerr_http_status(int err)
{
	return statuses[index_of(err)];
}

const char *yerr_default_message(int err)
{
	return messages[index_of(err)];
}

void errbuf_reset(struct errbuf *eb)
{
	eb->code = 0;
	eb->field[0] = '\0';
	eb->msg[0] = '\0';
}

int verror_field(struct errbuf *eb, int code, const char *field, const char *fmt, va_list ap)
{
	if (!eb)
		return code;
	char raw[sizeof(eb->msg)];

	/* Messages quote what came from outside (a path, a query, a spec
	 * value, a peer's answer): every one is made valid UTF-8 without
	 * control characters here, the one place they are all made, so that
	 * each can go into a JSON reply, a log line or a terminal as it is. */
	eb->code = code;
	utf8_escape_into(eb->field, sizeof(eb->field), field ? field : "");
	vsnprintf(raw, sizeof(raw), fmt, ap);
	utf8_escape_into(eb->msg, sizeof(eb->msg), raw);
	return code;
}

int error_field(struct errbuf *eb, int code, const char *field, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	verror_field(eb, code, field, fmt, ap);
	va_end(ap);
	return code;
}

int error(struct errbuf *eb, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	verror_field(eb, code, NULL, fmt, ap);
	va_end(ap);
	return code;
}

void die(const char *fmt, ...)
{
	va_list ap;
	fputs("yard: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}
