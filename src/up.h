/* `yard up`: a master and a local agent in one process, for one workstation. */
#ifndef YARD_UP_H
#define YARD_UP_H

int cmd_up(int argc, char **argv);

#endif
