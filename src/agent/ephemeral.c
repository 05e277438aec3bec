#include "base/compat.h"
#include "agent/ephemeral.h"

#include <jansson.h>

#include "agent/agent.h"
#include "base/xalloc.h"

void ephemeral_init(struct ephemeral *e, uint64_t idle_ms, uint64_t now_ms)
{
	memset(e, 0, sizeof(*e));
	e->idle_ms = idle_ms;
	e->idle_since_ms = now_ms;
}

bool ephemeral_tick(struct ephemeral *e, bool stopping, bool has_tasks, uint64_t now_ms, bool *stop_tasks)
{
	*stop_tasks = false;
	if (!e->why[0]) {
		if (stopping) {
			snprintf(e->why, sizeof(e->why), "its agent was stopped");
			e->deadline_ms = now_ms + AGENT_EPHEMERAL_STOP_MS;
			*stop_tasks = true;
		} else if (e->told && !has_tasks) {
			snprintf(e->why, sizeof(e->why), "told to leave by the master");
		} else if (has_tasks) {
			e->idle_since_ms = now_ms;
		} else if (e->idle_ms && now_ms - e->idle_since_ms >= e->idle_ms) {
			snprintf(e->why, sizeof(e->why), "idle for %" PRIu64 " s", (now_ms - e->idle_since_ms) / 1000);
		}
		if (e->why[0])
			fprintf(stderr, "yard agent: leaving: %s\n", e->why);
	}
	return e->why[0] && (!has_tasks || now_ms >= e->deadline_ms);
}

char *ephemeral_slurm_job(void)
{
	const char *aj = getenv("SLURM_ARRAY_JOB_ID"), *at = getenv("SLURM_ARRAY_TASK_ID");
	const char *j = getenv("SLURM_JOB_ID");
	char *id = aj && at ? xasprintf("%s_%s", aj, at) : j ? xstrdup(j) : NULL;

	if (id && strlen(id) <= 40 && strspn(id, "0123456789_") == strlen(id))
		return id;
	free(id);
	return NULL;
}

void ephemeral_say_left(const char *master_url, const struct httpc_tls *tls, const char *node, const char *id,
			const char *token, const char *why)
{
	struct errbuf eb = ERRBUF_INIT;
	char *esc = url_escape(id), *path = xasprintf("/v1/agents/%s/status", esc);
	json_t *body = json_pack("{s:[], s:s}", "tasks", "left", why), *reply = NULL;
	struct httpc c;
	long status = 0;

	httpc_init(&c, master_url, tls, token);
	c.timeout_ms = 5000;
	if (httpc_json(&c, "POST", path, body, &reply, &status, &eb))
		fprintf(stderr, "yard agent: could not tell the master that node '%s' left: %s\n", node, eb.msg);
	else
		fprintf(stderr, "yard agent: node '%s' left (%s)\n", node, why);
	json_decref(body);
	json_decref(reply);
	httpc_release(&c);
	free(path);
	free(esc);
}
