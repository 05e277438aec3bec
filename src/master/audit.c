#include "base/compat.h"
#include "master/audit.h"

#include <microhttpd.h>

#include "base/clock.h"
#include "base/strbuf.h"
#include "base/utf8.h"
#include "base/xalloc.h"
#include "master/http.h"

char *audit_escape_path(const char *path)
{
	const unsigned char *p = (const unsigned char *)path;
	size_t n = strlen(path);
	struct strbuf sb = STRBUF_INIT;

	for (size_t i = 0; i < n;) {
		size_t len = utf8_seq_len(p + i, n - i);
		if (!len || p[i] < 0x20 || p[i] == 0x7f || p[i] == '%') {
			strbuf_addf(&sb, "%%%02X", p[i]);
			i++;
		} else {
			strbuf_add(&sb, path + i, len);
			i += len;
		}
	}
	return strbuf_detach(&sb, NULL);
}

void audit_record(struct req *r)
{
	struct master *m = r->m;
	char addr[INET6_ADDRSTRLEN];
	char *path = audit_escape_path(r->audit_path ? r->audit_path : r->url ? r->url : "");
	struct store_audit e = {
		.time = (int64_t)wall_us(),
		.user = r->user,
		.role = r->user ? role_name(r->role) : NULL,
		.token = r->token_id[0] ? r->token_id : NULL,
		.addr = req_client_addr(r, addr, sizeof(addr)),
		.method = r->method ? r->method : "",
		.path = path,
		.status = r->status,
		.code = r->err_code ? yerr_code_str(r->err_code) : NULL,
	};
	int rc;

	if (!core_batch_open(m)) {
		rc = m->sops->audit_append(m->store, &e, &m->batch_eb);
		if (rc)
			m->batch_err = rc;
	}
	free(path);
}

void audit_event(struct master *m, const char *path, const char *code)
{
	struct store_audit e = { .time = (int64_t)wall_us(), .role = "master", .method = "EVENT", .path = path,
				 .code = code };
	int rc;

	if (!core_batch_open(m) && (rc = m->sops->audit_append(m->store, &e, &m->batch_eb)))
		m->batch_err = rc;
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static int add_entry(void *ctx, const struct store_audit *e)
{
	json_array_append_new(ctx, json_pack("{s:I, s:I, s:o, s:o, s:o, s:o, s:s, s:s, s:i, s:o}",
					     "id", (json_int_t)e->id, "time", (json_int_t)e->time,
					     "user", str_or_null(e->user), "role", str_or_null(e->role),
					     "token", str_or_null(e->token), "addr",
					     str_or_null(e->addr), "method", e->method, "path", e->path,
					     "status", e->status, "code", str_or_null(e->code)));
	return 0;
}

int audit_list(struct master *m, const char *user, uint64_t since_us, size_t limit, json_t **out,
	       struct errbuf *eb)
{
	json_t *entries = json_array();
	int rc;

	*out = NULL;
	rc = m->sops->audit_query(m->store, user, since_us > INT64_MAX ? INT64_MAX : (int64_t)since_us,
				  limit, add_entry, entries, eb);
	if (rc) {
		json_decref(entries);
		return rc;
	}
	*out = json_pack("{s:o}", "entries", entries);
	return 0;
}
