/* SPDX-License-Identifier: MIT */
/* ports.h - loopback ports for test servers that no other test process on the machine is handed
 * while they are claimed, even while their server is down (see ports.c). */
#ifndef REDLOCK_TEST_PORTS_H
#define REDLOCK_TEST_PORTS_H

#include <stdbool.h>

/* Claim a port below the kernel's ephemeral range that is bindable on 127.0.0.1 now and claimed
 * by no live process; -1 when no such range or claims directory can be had (the caller then asks
 * the kernel for a port, as before). The claim lasts until fixture_port_release or, should the
 * process die first, until it is gone. */
int fixture_port_claim(void);

/* Give back a port this process claimed (anything else is left alone). */
void fixture_port_release(int port);

#endif /* REDLOCK_TEST_PORTS_H */
