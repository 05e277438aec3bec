/*
 * The one error vocabulary of yard. Each entry gives the enum name, the
 * machine-readable code used in API errors, the HTTP status and a default
 * message. Functions return 0 on success or a negative enum yerr.
 *
 * struct errbuf carries the detail: which field (for spec and request
 * validation, a dotted path such as "tasks.worker.gpus") and a message that
 * says what failed and where (lowercase, no full stop, subject in quotes).
 * Both are always valid UTF-8 without control characters: error() escapes
 * any other byte as \xHH (base/utf8.h), so that a message quoting request
 * bytes can be sent as JSON and logged as one line.
 */
#ifndef YARD_ERROR_H
#define YARD_ERROR_H

#include <stdarg.h>

#define YARD_ERRORS(X)                                                              \
	X(INVALID_SPEC, "invalid_spec", 400, "invalid job spec")                    \
	X(BAD_REQUEST, "bad_request", 400, "bad request")                           \
	X(UNAUTHORIZED, "unauthorized", 401, "missing or unknown token")            \
	X(FORBIDDEN, "forbidden", 403, "not allowed")                               \
	X(NOT_FOUND, "not_found", 404, "not found")                                 \
	X(METHOD, "method_not_allowed", 405, "method not allowed")                  \
	X(CONFLICT, "conflict", 409, "conflict")                                    \
	X(DIGEST_MISMATCH, "digest_mismatch", 400, "the body does not match its digest") \
	X(MISSING_CHUNKS, "missing_chunks", 409, "chunks are missing")              \
	X(IN_USE, "in_use", 409, "in use")                                          \
	X(QUOTA_EXCEEDED, "quota_exceeded", 507, "quota exceeded")                  \
	X(TOO_LARGE, "too_large", 413, "request too large")                         \
	X(UNSCHEDULABLE, "unschedulable", 422, "no node can ever hold this task")   \
	X(TOO_MANY, "rate_limited", 429, "too many requests")                       \
	X(INTERNAL, "internal", 500, "internal error")                              \
	X(IO, "io_error", 500, "input/output error")                                \
	X(UNAVAILABLE, "unavailable", 503, "service unavailable")                   \
	X(NOT_LEADER, "not_leader", 503, "this master is a standby, not the leader") \
	X(NO_SPACE, "insufficient_storage", 507, "no space left on the server")       \
	X(LENGTH_REQUIRED, "length_required", 411, "the request's body needs a Content-Length") \
	X(BAD_GATEWAY, "bad_gateway", 502, "the upstream gave no usable answer")    \
	X(GATEWAY_TIMEOUT, "gateway_timeout", 504, "the upstream did not answer in time")

/* Codes are negative: YE_INVALID_SPEC == -1, YE_BAD_REQUEST == -2, ... */
enum yerr_code {
#define YERR_CODE_(name, code, status, msg) YERR_IDX_##name,
	YARD_ERRORS(YERR_CODE_)
#undef YERR_CODE_
	YERR__COUNT
};
#define YERR(name) (-(int)YERR_IDX_##name - 1)

/* yerr_code_str: "invalid_spec" for YERR(INVALID_SPEC); "internal" if unknown. */
const char *yerr_code_str(int err);
/* yerr_of_errno: YERR(NO_SPACE) for an errno that means the storage cannot
 * take a write (ENOSPC, EDQUOT, EROFS: 507), YERR(IO) for any other. */
int yerr_of_errno(int e);
/* yerr_from_code_str: YERR(...) for an API code string such as
 * "invalid_spec"; YERR(INTERNAL) for NULL or an unknown one. */
int yerr_from_code_str(const char *code);
/* yerr_http_status: 400 for YERR(INVALID_SPEC) and so on; 500 if unknown. */
int yerr_http_status(int err);
const char *yerr_default_message(int err);

struct errbuf {
	int code;          /* 0 or YERR(...) */
	char field[160];   /* dotted field path, "" when not about a field */
	char msg[1024];    /* human-readable, lowercase */
};

#define ERRBUF_INIT { 0, "", "" }

/* error() records code and message in eb (which may be NULL) and returns code. */
int error(struct errbuf *eb, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* error_field() is error() about one field of a document. */
int error_field(struct errbuf *eb, int code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int verror_field(struct errbuf *eb, int code, const char *field, const char *fmt, va_list ap);
void errbuf_reset(struct errbuf *eb);

/* die() prints "yard: MSG" to stderr and exits 1 (start-up failures only). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
