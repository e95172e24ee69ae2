/* net — socket addresses for the servers (api/server.c, api/inject.c). */
#ifndef DLM_UTIL_NET_H
#define DLM_UTIL_NET_H

#include <sys/socket.h>

/* host ("localhost" = 127.0.0.1, or a numeric IPv4 / IPv6 address) and
 * port as a socket address in *ss: AF_INET or AF_INET6, or -1 when host is
 * neither (no name lookup: a server binds what it is told). */
int net_listen_addr(const char *host, int port, struct sockaddr_storage *ss);

#endif
