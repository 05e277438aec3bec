#ifndef YARD_AGENT_HOSTINFO_H
#define YARD_AGENT_HOSTINFO_H
/*
 * What the agent says of its host at registration: CPUs, memory, and the
 * interface of its advertised address (GLOO_SOCKET_IFNAME and the like).
 */
#include <stdint.h>

/* Online CPUs (at least 1). */
long host_cpus(void);

/* MemTotal of /proc/meminfo in bytes, 0 when unreadable. */
uint64_t host_memory(void);

/* The name of the interface that holds addr, or NULL (caller frees). */
char *host_iface_of(const char *addr);

#endif
