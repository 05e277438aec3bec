/*
 * Durable submit throughput through the HTTP API: C clients (one libcurl
 * handle with keep-alive per thread) each POST /v1/jobs in a loop. A 201
 * means the master committed the job to its store, so every counted job is
 * durable. Prints jobs/s, errors and the client-side latency percentiles.
 * An https master is trusted by its pin (PIN, "sha256//...").
 *
 * usage: submit_throughput URL TOKEN [CLIENTS] [JOBS] [PIN]
 */
#include "base/compat.h"

#include <curl/curl.h>
#include <pthread.h>

#include "base/clock.h"
#include "base/xalloc.h"

struct client {
	pthread_t tid;
	const char *url;
	const char *token;
	const char *pin;  /* NULL or the https master's pin */
	unsigned jobs;
	unsigned ok;
	unsigned errors;
	uint64_t *lat_us; /* one per job */
};

static size_t discard(char *p, size_t s, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return s * n;
}

static void *run_client(void *arg)
{
	struct client *c = arg;
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char auth[512], url[512], body[512];
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
	snprintf(url, sizeof(url), "%s/v1/jobs", c->url);
	hdrs = curl_slist_append(hdrs, auth);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	if (c->pin) {
		curl_easy_setopt(h, CURLOPT_PINNEDPUBLICKEY, c->pin);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	for (unsigned i = 0; i < c->jobs; i++) {
		long status = 0;
		snprintf(body, sizeof(body),
			 "{\"spec\": {\"name\": \"bench-%lu-%u\", \"command\": [\"/bin/true\"],"
			 " \"tasks\": {\"worker\": {\"cpus\": 0.01}}}}",
			 (unsigned long)c->tid, i);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		uint64_t t0 = mono_us();
		CURLcode rc = curl_easy_perform(h);
		c->lat_us[i] = mono_us() - t0;
		if (rc == CURLE_OK)
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (status == 201)
			c->ok++;
		else
			c->errors++;
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	unsigned nclients = 8, njobs = 10000, ok = 0, errors = 0;
	struct client *clients;
	uint64_t *all;
	size_t nall = 0;
	if (argc < 3) {
		fprintf(stderr, "usage: submit_throughput URL TOKEN [CLIENTS] [JOBS] [PIN]\n");
		return 2;
	}
	if (argc > 3)
		nclients = (unsigned)strtoul(argv[3], NULL, 10);
	if (argc > 4)
		njobs = (unsigned)strtoul(argv[4], NULL, 10);
	if (!nclients || !njobs)
		return 2;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	clients = xcalloc(nclients, sizeof(*clients));
	all = xcalloc(njobs + nclients, sizeof(*all));
	uint64_t t0 = mono_us();
	for (unsigned i = 0; i < nclients; i++) {
		clients[i].url = argv[1];
		clients[i].token = argv[2];
		clients[i].pin = argc > 5 ? argv[5] : NULL;
		clients[i].jobs = njobs / nclients + (i < njobs % nclients);
		clients[i].lat_us = xcalloc(clients[i].jobs + 1, sizeof(uint64_t));
		pthread_create(&clients[i].tid, NULL, run_client, &clients[i]);
	}
	for (unsigned i = 0; i < nclients; i++) {
		pthread_join(clients[i].tid, NULL);
		ok += clients[i].ok;
		errors += clients[i].errors;
		memcpy(all + nall, clients[i].lat_us, clients[i].jobs * sizeof(uint64_t));
		nall += clients[i].jobs;
		free(clients[i].lat_us);
	}
	double secs = (double)(mono_us() - t0) / 1e6;
	sort_array(all, nall, sizeof(*all), cmp_u64);
	printf("submit_throughput clients=%u jobs=%u ok=%u errors=%u seconds=%.2f jobs_per_s=%.0f "
	       "latency_p50_ms=%.2f latency_p99_ms=%.2f\n",
	       nclients, njobs, ok, errors, secs, ok / secs, all[nall / 2] / 1000.0,
	       all[nall * 99 / 100] / 1000.0);
	free(all);
	free(clients);
	curl_global_cleanup();
	return errors ? 1 : 0;
}
