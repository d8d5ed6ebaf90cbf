/* SPDX-License-Identifier: MIT */
/* certs.h - the certificates the TLS tests and the bench use, made at run time with OpenSSL's
 * API (nothing secret is ever committed). EC P-256 keys, SHA-256 signatures, X.509 v3.
 *
 * tls_certs_make(dir) writes these PEM files into dir (keys unencrypted, mode 0600):
 *
 *   ca.crt                the test CA (ca.key is not kept: nothing else is signed later)
 *   server.crt/.key       signed by the CA, for localhost, 127.0.0.1 and ::1 (serverAuth)
 *   client.crt/.key       signed by the CA, CN redlock-test-client (clientAuth)
 *   other-ca.crt          an unrelated CA
 *   other-server.crt/.key signed by the unrelated CA, for localhost, 127.0.0.1 and ::1
 *   other-client.crt/.key signed by the unrelated CA (clientAuth)
 *   wrongname.crt/.key    signed by the CA, for wrong.example only
 *   cn-only.crt/.key      signed by the CA, CN localhost and no subjectAltName: for no name
 *   expired.crt/.key      signed by the CA, for localhost and 127.0.0.1, expired a day ago
 *   ca-dir/               ca.crt under its subject-hash name (<hash>.0), for a CA directory
 */
#ifndef REDLOCK_TEST_CERTS_H
#define REDLOCK_TEST_CERTS_H

#include <stddef.h>

/* Returns 0, or -1 with a message in err. */
int tls_certs_make(const char *dir, char *err, size_t err_len);

#endif
