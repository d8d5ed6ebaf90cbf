/* SPDX-License-Identifier: MIT */
/* test_cli_fence.c - `redlock --fence` (issue 12) against real redis-server processes: acquire
 * prints the fence, which grows with every holder; run exports REDLOCK_FENCE to COMMAND; status
 * shows each node's counter; without --fence nothing of this appears; --fence-domain (issue 33)
 * shares one counter among keys. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cli_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Acquire key with --fence, or with --fence-domain domain (not NULL); returns the fence, and
 * the token in *token (malloc'ed). */
static int64_t domain_acquire(const char *key, const char *domain, char **token)
{
    proc p;
    if (domain != NULL)
        TOOL(&p, NULL, "-n", shared_nodes, "--fence-domain", domain, "acquire", key);
    else
        TOOL(&p, NULL, "-n", shared_nodes, "--fence", "acquire", key);
    expect_status(&p, 0);
    jv *v = json_line(&p);
    int64_t fence = jint(v, "fence");
    *token = strdup(jstr(v, "token"));
    jv_free(v);
    proc_free(&p);
    return fence;
}

static int64_t fenced_acquire(const char *key, char **token)
{
    return domain_acquire(key, NULL, token);
}

static void release(const char *key, const char *token)
{
    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "--all", "release", key, token);
    expect_status(&p, 0);
    proc_free(&p);
}

static void acquire_prints_a_growing_fence(void **state)
{
    (void)state;
    char *token;
    for (int64_t want = 1; want <= 3; want++) {
        assert_int_equal(fenced_acquire("cli:fence", &token), want);
        release("cli:fence", token);
        free(token);
    }
    /* Busy: the fence is null, the exit status the usual 75. */
    assert_int_equal(fenced_acquire("cli:fence", &token), 4);
    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "-f", "acquire", "cli:fence");
    expect_status(&p, 75);
    jv *v = json_line(&p);
    assert_int_equal(jv_get(v, "fence")->type, JV_NULL);
    jv_free(v);
    proc_free(&p);
    release("cli:fence", token);
    free(token);
    /* Without --fence: no "fence" member, and the counter is left alone. */
    TOOL(&p, NULL, "-n", shared_nodes, "acquire", "cli:fence");
    expect_status(&p, 0);
    v = json_line(&p);
    assert_null(jv_get(v, "fence"));
    release("cli:fence", jstr(v, "token"));
    jv_free(v);
    proc_free(&p);
    assert_int_equal(fenced_acquire("cli:fence", &token), 5);
    release("cli:fence", token);
    free(token);
}

/* run --fence: COMMAND sees REDLOCK_FENCE (next to REDLOCK_KEY and REDLOCK_TOKEN), and --json
 * reports it; without --fence, an inherited REDLOCK_FENCE is passed on untouched. */
static void run_exports_the_fence(void **state)
{
    (void)state;
    char *token;
    int64_t before = fenced_acquire("cli:fence-run", &token);
    release("cli:fence-run", token);
    free(token);
    proc p;
    TOOL(&p, ARGS("REDLOCK_FENCE=stale"), "-n", shared_nodes, "--fence", "run", "cli:fence-run",
         "--", "sh", "-c", "echo \"F=$REDLOCK_FENCE K=$REDLOCK_KEY\"");
    expect_status(&p, 0);
    char want[64];
    snprintf(want, sizeof(want), "F=%lld K=cli:fence-run\n", (long long)before + 1);
    assert_string_equal(p.out, want);
    proc_free(&p);

    TOOL(&p, NULL, "-n", shared_nodes, "-f", "--json", "run", "cli:fence-run", "--", "true");
    expect_status(&p, 0);
    jv *v = json_line(&p);
    assert_int_equal(jint(v, "fence"), before + 2);
    jv_free(v);
    proc_free(&p);

    TOOL(&p, ARGS("REDLOCK_FENCE=outer"), "-n", shared_nodes, "run", "cli:fence-run", "--", "sh",
         "-c", "echo \"F=$REDLOCK_FENCE\"");
    expect_status(&p, 0);
    assert_string_equal(p.out, "F=outer\n");
    proc_free(&p);
    TOOL(&p, NULL, "-n", shared_nodes, "--json", "run", "cli:fence-run", "--", "true");
    expect_status(&p, 0);
    v = json_line(&p);
    assert_null(jv_get(v, "fence"));
    jv_free(v);
    proc_free(&p);
}

/* status --fence: each node's counter (0 where there is none). */
static void status_shows_each_counter(void **state)
{
    (void)state;
    char *token;
    int64_t fence = fenced_acquire("cli:fence-status", &token);
    /* The other nodes' commits land a moment after the decision: wait for every counter. */
    char want[32];
    snprintf(want, sizeof(want), "%lld", (long long)fence);
    long long until = now_ms() + LATE_NODE_WAIT_MS;
    for (unsigned i = 0; i < shared.n; i++) {
        for (;;) {
            char *c = server_get(&shared, i, "cli:fence-status:fence");
            bool there = c != NULL && strcmp(c, want) == 0;
            free(c);
            if (there)
                break;
            assert_true(now_ms() < until);
            sleep_ms(20);
        }
    }
    server_del(&shared, 2, "cli:fence-status:fence");
    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "--fence", "status", "cli:fence-status");
    expect_status(&p, 0);
    jv *v = json_line(&p);
    assert_int_equal(jv_get(v, "nodes")->n, shared.n);
    for (unsigned i = 0; i < shared.n; i++)
        assert_int_equal(jint(jv_at(jv_get(v, "nodes"), i), "fence"), i == 2 ? 0 : fence);
    jv_free(v);
    proc_free(&p);
    TOOL(&p, NULL, "-n", shared_nodes, "status", "cli:fence-status");
    expect_status(&p, 0);
    v = json_line(&p);
    for (unsigned i = 0; i < shared.n; i++)
        assert_null(jv_get(jv_at(jv_get(v, "nodes"), i), "fence"));
    jv_free(v);
    proc_free(&p);
    release("cli:fence-status", token);
    free(token);
}

/* --fence-domain: two keys of one domain take their fences from one counter, NAME:fence, which
 * grows across both; neither gets a counter of its own; run exports the fence too. */
static void domain_shared_by_keys(void **state)
{
    (void)state;
    char *token;
    static const char *const keys[] = {"cli:dom:a", "cli:dom:b", "cli:dom:a", "cli:dom:b"};
    for (int64_t want = 1; want <= 4; want++) {
        assert_int_equal(domain_acquire(keys[want - 1], "cli:users", &token), want);
        release(keys[want - 1], token);
        free(token);
    }
    proc p;
    TOOL(&p, NULL, "-n", shared_nodes, "--fence-domain", "cli:users", "run", "cli:dom:a", "--",
         "sh", "-c", "echo \"F=$REDLOCK_FENCE\"");
    expect_status(&p, 0);
    assert_string_equal(p.out, "F=5\n");
    proc_free(&p);
    long long until = now_ms() + LATE_NODE_WAIT_MS;
    for (unsigned i = 0; i < shared.n; i++) {
        char *own = server_get(&shared, i, "cli:dom:a:fence");
        assert_null(own);
        for (;;) { /* the last nodes' scripts land a moment after the decision */
            char *c = server_get(&shared, i, "cli:users:fence");
            bool there = c != NULL && strcmp(c, "5") == 0;
            free(c);
            if (there)
                break;
            assert_true(now_ms() < until);
            sleep_ms(20);
        }
        assert_null(server_get(&shared, i, "cli:dom:b:fence"));
    }
    TOOL(&p, NULL, "-n", shared_nodes, "--fence-domain", "cli:users", "status", "cli:dom:a");
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "--fence-domain is for acquire and run"));
    proc_free(&p);
}

static void help_and_usage(void **state)
{
    (void)state;
    proc p;
    TOOL(&p, NULL, "--help");
    expect_status(&p, 0);
    assert_non_null(strstr(p.out, "-f, --fence"));
    assert_non_null(strstr(p.out, "REDLOCK_FENCE"));
    proc_free(&p);
    TOOL(&p, NULL, "-n", shared_nodes, "--fence=1", "acquire", "cli:fence-usage");
    expect_status(&p, 64);
    assert_non_null(strstr(p.err, "--fence takes no value"));
    proc_free(&p);
}

int main(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(acquire_prints_a_growing_fence),
        cmocka_unit_test(run_exports_the_fence),
        cmocka_unit_test(status_shows_each_counter),
        cmocka_unit_test(domain_shared_by_keys),
        cmocka_unit_test(help_and_usage),
    };
    return cli_main("cli-fence", tests, sizeof(tests) / sizeof(tests[0]), NULL);
}
