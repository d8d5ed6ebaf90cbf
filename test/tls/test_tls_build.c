/* SPDX-License-Identifier: MIT */
/* test_tls_build.c - what a client does with rediss:// in this build: with TLS built in, it is
 * accepted (the system's CA store when no CA is given); without, it is refused at creation with
 * a message that says why. Runs in every build, with no server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "redlock.h"

static void rediss_in_this_build(void **state)
{
    (void)state;
    redlock_url u;
    char err[256];
    assert_int_equal(redlock_url_parse(&u, "rediss://:pw@127.0.0.1:1", err, sizeof(err)), 0);
    assert_true(u.tls); /* parsing never depends on the build */
    redlock_url_free(&u);

    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *urls[2] = {"redis://127.0.0.1:1", "rediss://:pw@127.0.0.1:2"};
    redlock_client *c = NULL;
    int rc = redlock_client_new(&loop, urls, 2, NULL, &c, err, sizeof(err));
    const char *backend = redlock_tls_backend();
    if (backend == NULL) {
        assert_int_equal(rc, REDLOCK_EINVAL);
        assert_null(c);
        assert_non_null(strstr(err, "node 1 (rediss://:***@127.0.0.1:2): TLS (rediss://) is not "
                                    "built into this library"));
        assert_null(strstr(err, "pw"));
    } else {
        fprintf(stderr, "# TLS: %s\n", backend);
        assert_non_null(strstr(backend, "OpenSSL"));
        assert_int_equal(rc, 0);
        assert_int_equal(redlock_client_close(c, NULL, NULL), 0);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(rediss_in_this_build)};
    return cmocka_run_group_tests_name("tls-build", tests, NULL, NULL);
}
