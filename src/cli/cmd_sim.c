#include "base/compat.h"

#include "base/parse.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "sim/pollux.h"
#include "sim/sim.h"

/* "4x8" into nodes and GPUs per node. */
static int parse_cluster(const char *s, unsigned *nodes, unsigned *gpus)
{
	const char *p = s;
	uint64_t n, g;

	if (parse_u64(&p, &n) < 0 || (*p != 'x' && *p != 'X'))
		return -1;
	p++;
	if (parse_u64(&p, &g) < 0 || *p || !n || !g || n > 1000000 || g > 1024)
		return -1;
	*nodes = (unsigned)n;
	*gpus = (unsigned)g;
	return 0;
}

/* "3250,7200,18000" into ascending thresholds. */
static int parse_thresholds(const char *s, struct sched_policy_conf *conf)
{
	const char *p = s;

	conf->nthresholds = 0;
	for (;;) {
		uint64_t v;
		if (conf->nthresholds == ARRAY_SIZE(conf->thresholds) || parse_u64(&p, &v) < 0 ||
		    (conf->nthresholds && v <= conf->thresholds[conf->nthresholds - 1]))
			return -1;
		conf->thresholds[conf->nthresholds++] = v;
		if (!*p)
			return 0;
		if (*p++ != ',')
			return -1;
	}
}

static int write_jobs_csv(const char *path, const struct sim_trace *trace,
			  const struct sim_result *res)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f, "job_id,num_gpu,submit_time,duration,start_time,end_time,jct,queued,preemptions\n");
	for (size_t i = 0; i < trace->njobs; i++) {
		const struct sim_job *j = &trace->jobs[i];
		if (res[i].end == UINT64_MAX) {
			fprintf(f, "%" PRIu64 ",%u,%" PRIu64 ",%" PRIu64 ",,,,,%u\n", j->id, j->gpus,
				j->submit, j->duration, res[i].preemptions);
			continue;
		}
		fprintf(f,
			"%" PRIu64 ",%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
			",%" PRIu64 ",%u\n",
			j->id, j->gpus, j->submit, j->duration, res[i].start, res[i].end, res[i].jct,
			res[i].queued, res[i].preemptions);
	}
	return fclose(f) ? -1 : 0;
}

int cmd_sim(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *trace_path = NULL, *format = "tiresias", *cluster = NULL, *policy = NULL;
	const char *penalty = NULL, *thresholds = NULL, *jobs_csv = NULL, *age = NULL;
	const char *profiles = NULL, *model = NULL, *scheme = "place";
	const char *ckpt = NULL, *min_run = NULL, *max_lost = NULL;
	int need_ckpt = 0, live = 0;
	const struct cli_option opts[] = {
		{ "trace", 't', CLI_OPT_STRING, &trace_path, "FILE", "the job trace (CSV)" },
		{ "format", 'f', CLI_OPT_STRING, &format, "FMT",
		  "tiresias (default), philly or pollux" },
		{ "cluster", 'c', CLI_OPT_STRING, &cluster, "NODESxGPUS", "the cluster, as 4x8" },
		{ "policy", 'p', CLI_OPT_STRING, &policy, "P",
		  "glas (default), las, fifo, fair, srtf or greedy" },
		{ "scheme", 0, CLI_OPT_STRING, &scheme, "S",
		  "place (default: the live scheduler on nodes and GPUs) or count (GPUs counted, "
		  "as the Tiresias simulator)" },
		{ "restart-penalty", 0, CLI_OPT_STRING, &penalty, "S",
		  "seconds a job loses each time it resumes after a preemption" },
		{ "thresholds", 0, CLI_OPT_STRING, &thresholds, "T1,T2,..",
		  "las levels in attained GPU-seconds (default 3250,7200,18000)" },
		{ "age", 0, CLI_OPT_STRING, &age, "PCT",
		  "las ageing: promote a job that waited PCT % of its run time (0 = off)" },
		{ "checkpoint-interval", 0, CLI_OPT_STRING, &ckpt, "S",
		  "jobs checkpoint every S s of a run; a preempted job loses the work since" },
		{ "min-run", 0, CLI_OPT_STRING, &min_run, "S",
		  "no preemption within S s of a start or resume (but by a higher priority)" },
		{ "max-lost", 0, CLI_OPT_STRING, &max_lost, "S",
		  "no preemption that loses more than S s of work (but by a higher priority)" },
		{ "need-checkpoint", 0, CLI_OPT_FLAG, &need_ckpt, NULL,
		  "no preemption of a job not checkpointed in its run (but by a higher priority)" },
		{ "live", 0, CLI_OPT_FLAG, &live, NULL,
		  "the live master's protections: --min-run 120 --max-lost 600 --need-checkpoint" },
		{ "jobs-csv", 0, CLI_OPT_STRING, &jobs_csv, "FILE", "write one line per job to FILE" },
		{ "profiles", 0, CLI_OPT_STRING, &profiles, "DIR",
		  "pollux: the per-application profiles (the artifact's simulator/traces)" },
		{ "pollux-model", 0, CLI_OPT_STRING, &model, "M",
		  "pollux: job length by iterations (default) or progress" },
	};
	struct errbuf eb = ERRBUF_INIT;
	struct sim_trace trace;
	struct sim_opts so;
	struct sim_result *res;
	struct sim_stats st;
	uint64_t restart = 0;
	int npos, rc, fmt, pol = SCHED_POLICY_DEFAULT, pmodel;

	rc = cli_parse(ctx,
		       "sim --trace FILE --cluster NODESxGPUS [--format F] [--policy P] [--scheme S] "
		       "[--restart-penalty S] [--thresholds T1,..] [--age PCT] "
		       "[--checkpoint-interval S] [--min-run S] [--max-lost S] [--need-checkpoint] "
		       "[--live] [--jobs-csv FILE] [--profiles DIR] [--pollux-model M]",
		       opts, ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (!trace_path || !cluster)
		return cli_usage_error(ctx, "--trace and --cluster are required");
	if ((fmt = sim_format_parse(format)) < 0)
		return cli_usage_error(ctx, "unknown trace format '%s'", format);
	if (fmt == SIM_FORMAT_POLLUX && !profiles)
		return cli_usage_error(ctx, "%s", SIM_POLLUX_NEEDS_PROFILES);
	if (fmt != SIM_FORMAT_POLLUX && profiles)
		return cli_usage_error(ctx, "--profiles is for --format pollux, not '%s'", format);
	if (fmt != SIM_FORMAT_POLLUX && model)
		return cli_usage_error(ctx, "--pollux-model is for --format pollux, not '%s'", format);
	if (!model || !strcmp(model, "iterations"))
		pmodel = POLLUX_MODEL_ITERATIONS;
	else if (!strcmp(model, "progress"))
		pmodel = POLLUX_MODEL_PROGRESS;
	else
		return cli_usage_error(ctx, "--pollux-model expects iterations or progress, got '%s'",
				       model);
	if (policy && (pol = sched_policy_parse(policy)) < 0)
		return cli_usage_error(ctx, "unknown policy '%s'", policy);
	memset(&so, 0, sizeof(so));
	if (!strcmp(scheme, "place"))
		so.scheme = SIM_SCHEME_PLACE;
	else if (!strcmp(scheme, "count"))
		so.scheme = SIM_SCHEME_COUNT;
	else
		return cli_usage_error(ctx, "--scheme expects place or count, got '%s'", scheme);
	if (parse_cluster(cluster, &so.nodes, &so.gpus_per_node) < 0)
		return cli_usage_error(ctx, "--cluster expects NODESxGPUS (as 4x8), got '%s'", cluster);
	if (penalty && parse_u64_str(penalty, &restart) < 0)
		return cli_usage_error(ctx, "--restart-penalty expects seconds, got '%s'", penalty);
	so.restart_penalty = restart;
	sched_policy_conf_init(&so.conf, (enum sched_policy)pol);
	if (thresholds && parse_thresholds(thresholds, &so.conf) < 0)
		return cli_usage_error(ctx, "--thresholds expects ascending integers, got '%s'",
				       thresholds);
	if (age) {
		uint64_t v;
		if (parse_u64_str(age, &v) < 0 || v > UINT32_MAX)
			return cli_usage_error(ctx, "--age expects a percentage, got '%s'", age);
		so.conf.age_pct = (unsigned)v;
	}
	if (ckpt && (parse_u64_str(ckpt, &so.checkpoint_interval) < 0 || !so.checkpoint_interval))
		return cli_usage_error(ctx, "--checkpoint-interval expects seconds (> 0), got '%s'", ckpt);
	if (live) {
		/* the master's defaults (sched/policy.h): need_checkpoint goes with
		 * max_lost_s there */
		so.conf.min_run_s = SCHED_PREEMPT_MIN_RUN_S;
		so.conf.max_lost_s = SCHED_PREEMPT_MAX_LOST_S;
		so.conf.need_checkpoint = SCHED_PREEMPT_MAX_LOST_S > 0;
	}
	if (min_run && parse_u64_str(min_run, &so.conf.min_run_s) < 0)
		return cli_usage_error(ctx, "--min-run expects seconds, got '%s'", min_run);
	if (max_lost && parse_u64_str(max_lost, &so.conf.max_lost_s) < 0)
		return cli_usage_error(ctx, "--max-lost expects seconds, got '%s'", max_lost);
	if (need_ckpt)
		so.conf.need_checkpoint = true;
	if ((fmt == SIM_FORMAT_POLLUX
		     ? sim_trace_load_pollux(trace_path, profiles, so.gpus_per_node, pmodel, &trace,
					     &eb)
		     : sim_trace_load(trace_path, (enum sim_format)fmt, &trace, &eb)) < 0)
		return cli_fail(ctx, &eb);

	res = xcalloc(trace.njobs + 1, sizeof(*res));
	sim_run(&trace, &so, res, &st);
	rc = EXIT_OK;
	if (jobs_csv && write_jobs_csv(jobs_csv, &trace, res) < 0) {
		fprintf(stderr, "yard: cannot write '%s': %s\n", jobs_csv, strerror(errno));
		rc = EXIT_FAIL;
	}
	if (ctx->json) {
		json_t *doc = json_pack(
			"{s:s, s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:I, s:f, s:I}",
			"trace", trace_path, "format", format, "nodes", (json_int_t)so.nodes,
			"gpus_per_node", (json_int_t)so.gpus_per_node, "policy",
			sched_policy_name(so.conf.policy), "jobs", (json_int_t)st.jobs, "unfinished",
			(json_int_t)st.unfinished, "restart_penalty_s", (json_int_t)restart,
			"avg_jct_s", st.avg_jct, "median_jct_s", st.median_jct, "p95_jct_s", st.p95_jct,
			"p99_jct_s", st.p99_jct, "avg_queue_s", st.avg_queue, "makespan_s",
			(json_int_t)st.makespan, "gpu_utilisation", st.utilisation, "preemptions",
			(json_int_t)st.preemptions);
		json_object_set_new(doc, "scheme", json_string(scheme));
		json_object_set_new(doc, "checkpoint_interval_s",
				    json_integer((json_int_t)so.checkpoint_interval));
		json_object_set_new(doc, "min_run_s", json_integer((json_int_t)so.conf.min_run_s));
		json_object_set_new(doc, "max_lost_s", json_integer((json_int_t)so.conf.max_lost_s));
		json_object_set_new(doc, "need_checkpoint", json_boolean(so.conf.need_checkpoint));
		json_object_set_new(doc, "lost_gpu_s", json_integer((json_int_t)st.lost_gpu_s));
		json_object_set_new(doc, "events", json_integer((json_int_t)st.events));
		json_object_set_new(doc, "peak_queue", json_integer((json_int_t)st.peak_queue));
		if (fmt == SIM_FORMAT_POLLUX)
			json_object_set_new(doc, "pollux_model", json_string(model ? model : "iterations"));
		cli_print_json(doc);
		json_decref(doc);
	} else {
		printf("policy         %s\n", sched_policy_name(so.conf.policy));
		printf("scheme         %s\n", scheme);
		printf("cluster        %ux%u = %u GPUs\n", so.nodes, so.gpus_per_node,
		       so.nodes * so.gpus_per_node);
		if (fmt == SIM_FORMAT_POLLUX)
			printf("job lengths    pollux %s model\n", model ? model : "iterations");
		printf("jobs           %zu", st.jobs);
		if (st.unfinished)
			printf(" (%zu larger than the cluster, never run)", st.unfinished);
		printf("\navg JCT        %.1f s\n", st.avg_jct);
		printf("median JCT     %.1f s\n", st.median_jct);
		printf("p95 JCT        %.1f s\n", st.p95_jct);
		printf("p99 JCT        %.1f s\n", st.p99_jct);
		printf("avg queueing   %.1f s\n", st.avg_queue);
		printf("makespan       %" PRIu64 " s\n", st.makespan);
		printf("GPU util       %.1f %%\n", st.utilisation * 100);
		printf("preemptions    %" PRIu64 "\n", st.preemptions);
		if (so.checkpoint_interval)
			printf("work lost      %" PRIu64 " GPU-s (checkpoints every %" PRIu64 " s)\n",
			       st.lost_gpu_s, so.checkpoint_interval);
		if (so.conf.min_run_s || so.conf.max_lost_s || so.conf.need_checkpoint)
			printf("protection     min run %" PRIu64 " s, max lost %" PRIu64
			       " s, checkpoint needed: %s\n",
			       so.conf.min_run_s, so.conf.max_lost_s,
			       so.conf.need_checkpoint ? "yes" : "no");
		printf("events         %" PRIu64 "\n", st.events);
		printf("peak queue     %zu jobs\n", st.peak_queue);
	}
	free(res);
	sim_trace_release(&trace);
	return rc;
}
