#include "base/compat.h"
#include "cli/cli.h"

#include "cli/cmd.h"

/* The command table: one line per command, git.c style. */
static const struct cli_command commands[] = {
	{ "submit", cmd_submit, NEED_MASTER, "submit a job from a spec file" },
	{ "ls", cmd_ls, NEED_MASTER, "list jobs" },
	{ "show", cmd_show, NEED_MASTER, "show a job and its tasks" },
	{ "logs", cmd_logs, NEED_MASTER, "print (or follow) a task's output" },
	{ "exec", cmd_exec, NEED_MASTER, "run a command in a running task (-t: on a terminal, -i: with stdin)" },
	{ "shell", cmd_shell, NEED_MASTER, "a login shell on a node with the GPUs asked for (an interactive job)" },
	{ "attach", cmd_attach, NEED_MASTER, "attach to an interactive job's terminal again (~. detaches)" },
	{ "port-forward", cmd_portforward, NEED_MASTER, "forward a local port to a port of a running task" },
	{ "notebook", cmd_notebook, NEED_MASTER, "start a Jupyter notebook as a job and print its URL" },
	{ "metrics", cmd_metrics, NEED_MASTER, "show a job's training metrics" },
	{ "cancel", cmd_cancel, NEED_MASTER, "cancel a job" },
	{ "wait", cmd_wait, NEED_MASTER, "wait until a job ends" },
	{ "hold", cmd_hold, NEED_MASTER, "keep queued jobs from starting until released" },
	{ "release", cmd_release, NEED_MASTER, "let held jobs start again" },
	{ "update", cmd_update, NEED_MASTER, "change a job's priority after submit" },
	{ "rerun", cmd_rerun, NEED_MASTER, "submit a new job from an old one's spec and code" },
	{ "nodes", cmd_nodes, NEED_MASTER, "list nodes and their GPUs; drain, resume or remove one" },
	{ "queue", cmd_queue, NEED_MASTER, "list waiting jobs and why they wait" },
	{ "provisioners", cmd_provisioners, NEED_MASTER, "the elastic pools: their nodes and requests" },
	{ "images", cmd_images, NEED_MASTER, "list the images built from jobs' code, their repositories and sizes" },
	{ "usage", cmd_usage, NEED_MASTER, "GPU- and CPU-hours and peak memory by user, team or pool" },
	{ "outputs", cmd_outputs, NEED_MASTER, "list what a job's tasks left in YARD_OUTPUT_DIR" },
	{ "download", cmd_download, NEED_MASTER, "download a job's outputs (or checkpoint) into a dir" },
	{ "data", cmd_data, NEED_MASTER, "push, list, show and delete datasets" },
	{ "exp", cmd_exp, NEED_MASTER, "list experiments (sweeps) and show their trials" },
	{ "template", cmd_template, NEED_MASTER, "jobs run again on each new version of a dataset" },
	{ "token", cmd_token, NEED_MASTER, "create, list and revoke API tokens" },
	{ "audit", cmd_audit, NEED_MASTER, "show the audit log of state-changing requests (admin)" },
	{ "admin reload", cmd_admin_reload, NEED_MASTER | SUBCOMMAND, "the master reads its config file again" },
	{ "sim", cmd_sim, 0, "replay a job trace through the scheduler (offline)" },
	{ "mpirun", cmd_mpirun, TASK_HELPER, "run mpirun over the job's nodes (inside an mpi task)" },
	{ "mpi-rsh", cmd_mpi_rsh, TASK_HELPER, "mpirun's remote launch agent (inside an mpi task)" },
	{ "mpi-worker", cmd_mpi_worker, TASK_HELPER, "host an mpi job's ranks (inside an mpi task)" },
};

static const struct cli_command *find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

int cli_has_command(const char *name)
{
	return name && find(name) != NULL;
}

void cli_usage(void *stream)
{
	FILE *out = stream;
	fprintf(out, "commands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!(commands[i].flags & (TASK_HELPER | SUBCOMMAND)))
			fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(out, "\nRun 'yard COMMAND --help' for a command's options. The master and token\n"
		     "come from --master/--token, YARD_MASTER/YARD_TOKEN or ~/.config/yard/config;\n"
		     "a master may be a list URL1,URL2 of masters sharing a store (the leader is found).\n");
}

int cli_main(int argc, char **argv)
{
	const struct cli_command *c = argc > 0 ? find(argv[0]) : NULL;

	if (!c) {
		fprintf(stderr, "yard: '%s' is not a yard command\n", argc > 0 ? argv[0] : "");
		return EXIT_USAGE;
	}
	return cli_run(c, argc, argv);
}
