/* `yard admin`: commands an operator runs on the master's host. */
#ifndef YARD_ADMIN_H
#define YARD_ADMIN_H

/* cmd_admin runs `yard admin SUBCOMMAND ...` (argv[0] is "admin"); returns
 * the exit status: 0 success, 1 failure, 2 usage error. */
int cmd_admin(int argc, char **argv);

#endif
