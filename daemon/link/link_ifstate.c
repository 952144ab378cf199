/* link_ifstate.c: whether UCX would take the interface of the listen address now (see link.h
 * link_ifstate). UCX's tcp transport lists the interfaces that are up and running once, at
 * ucp_init, and refuses every connection that arrives on another one later ("got connection
 * request ... on a device veth0 which was not present during UCP initialization", UCX PR
 * #5794: restart the process or ignore that device); so a link started while its interface was
 * down never accepts on it. Loop thread (getifaddrs: a netlink round trip). */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "link.h"

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
    if (!a || !b || a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return false;
}

static bool wildcard(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
    return a->sa_family == AF_INET6 &&
           !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &in6addr_any, sizeof in6addr_any);
}

int link_ifstate(const char *host, char *ifname, size_t len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *ai = NULL;
    snprintf(ifname, len, "%s", "");
    if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai)
        return -EINVAL; /* the start's own check says why (daemon_check.c) */
    struct ifaddrs *ifs = NULL;
    int rc = -EADDRNOTAVAIL;
    if (wildcard(ai->ai_addr)) {
        rc = 1; /* every interface: nothing to wait for */
    } else if (getifaddrs(&ifs) < 0) {
        rc = -errno;
    } else {
        for (const struct ifaddrs *i = ifs; i; i = i->ifa_next)
            if (same_addr(i->ifa_addr, ai->ai_addr)) {
                snprintf(ifname, len, "%s", i->ifa_name);
                rc = (i->ifa_flags & IFF_UP) && (i->ifa_flags & IFF_RUNNING) ? 1 : 0;
                break;
            }
        freeifaddrs(ifs);
    }
    freeaddrinfo(ai);
    return rc;
}
