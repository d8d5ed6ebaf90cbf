/* SPDX-License-Identifier: MIT */
/* redlock-bench-certs DIR - make the TLS certificates bench/run gives its TLS servers (the test
 * CA, a server certificate for localhost and 127.0.0.1, a client certificate...: see
 * test/tls/certs.h) in DIR. Nothing is ever committed: they are made fresh for every run. */
#include <stdio.h>

#include "certs.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: redlock-bench-certs DIR\n");
        return 64;
    }
    char err[512];
    if (tls_certs_make(argv[1], err, sizeof(err)) != 0) {
        fprintf(stderr, "redlock-bench-certs: %s\n", err);
        return 1;
    }
    return 0;
}
