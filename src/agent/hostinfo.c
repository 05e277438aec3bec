#include "base/compat.h"
#include "agent/hostinfo.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

long host_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? n : 1;
}

uint64_t host_memory(void)
{
	struct strbuf sb = STRBUF_INIT;
	uint64_t kb = 0;
	if (strbuf_read_file(&sb, "/proc/meminfo", 1 << 20) == 0) {
		const char *p = strstr(sb.buf, "MemTotal:");
		if (p) {
			p += 9;
			while (*p == ' ')
				p++;
			if (parse_u64(&p, &kb) < 0)
				kb = 0;
		}
	}
	strbuf_release(&sb);
	return kb * 1024;
}

char *host_iface_of(const char *addr)
{
	struct ifaddrs *ifs = NULL;
	char *name = NULL;

	if (getifaddrs(&ifs) < 0)
		return NULL;
	for (struct ifaddrs *i = ifs; i && !name; i = i->ifa_next) {
		char buf[INET6_ADDRSTRLEN];
		const void *a;
		if (!i->ifa_addr || !i->ifa_name)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			a = &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr;
		else if (i->ifa_addr->sa_family == AF_INET6)
			a = &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr;
		else
			continue;
		if (inet_ntop(i->ifa_addr->sa_family, a, buf, sizeof(buf)) && !strcmp(buf, addr))
			name = xstrdup(i->ifa_name);
	}
	freeifaddrs(ifs);
	return name;
}
