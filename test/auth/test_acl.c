/* SPDX-License-Identifier: MIT */
/* test_acl.c - the whole API with an ACL user that has exactly the rights docs/operations.md
 * recommends (the line is read from the doc itself, so the doc and the test cannot drift apart):
 * acquire, inspect, extend, extend with RETAKE on a node that lost the key, an extend after the
 * scripts were flushed (NOSCRIPT, then EVAL), release, auto-extension, the blocking client, and
 * the refusal of two URLs that reach one server (which needs INFO). Nothing may come back as an
 * error vote, and the client's log may say nothing was refused: a right missing from the recipe
 * would show as one or the other. */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACL_PASS "Rec1pe-Pw"

/* The rules of "ACL SETUSER locker on >secret RULES" in docs/operations.md (malloc'ed). */
static char *recommended_rules(void)
{
    const char *dir = getenv("REDLOCK_DOCS");
    assert_non_null(dir);
    char path[512];
    snprintf(path, sizeof(path), "%s/operations.md", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot read %s: %s", path, strerror(errno));
    static const char head[] = "ACL SETUSER locker on >secret ";
    char line[1024];
    char *rules = NULL;
    while (rules == NULL && fgets(line, sizeof(line), f) != NULL) {
        char *at = strstr(line, head);
        if (at != NULL) {
            rules = strdup(at + strlen(head));
            rules[strcspn(rules, "\r\n`")] = '\0';
        }
    }
    fclose(f);
    if (rules == NULL)
        fail_msg("%s has no line \"%s...\"", path, head);
    return rules;
}

/* The servers run user locker with the recommended rules; the default user keeps every right,
 * for the test's own look at the keys. */
static void start_recipe_servers(h_env *env)
{
    char *rules = recommended_rules();
    char conf[1024];
    snprintf(conf, sizeof(conf), "user locker on >%s %s\n", ACL_PASS, rules);
    free(rules);
    h_env_start(env, 3, conf);
}

typedef struct urls {
    char text[4][256];
    const char *ptrs[4];
} urls;

static const char *const *locker_urls(urls *u, h_env *env)
{
    for (unsigned i = 0; i < env->cluster.n; i++) {
        snprintf(u->text[i], sizeof(u->text[i]), "redis://locker:%s@127.0.0.1:%d", ACL_PASS,
                 env->cluster.servers[i].port);
        u->ptrs[i] = u->text[i];
    }
    return u->ptrs;
}

/* The client's log: a right the recipe lacks but the client can do without (+script|load: EVAL
 * instead; +info: no twin detection) shows only here, as a line that says it was refused. Written
 * by the library's thread (the blocking client's own), read after that client is freed. */
static unsigned refused_lines;
static char first_refused[400];

static void on_log(redlock_client *client, redlock_log_level level, const char *url,
                   const char *message, void *data)
{
    (void)client;
    (void)url;
    (void)data;
    if (level == REDLOCK_LOG_ERROR || (level == REDLOCK_LOG_WARN && strstr(message, "refused"))) {
        if (refused_lines++ == 0)
            snprintf(first_refused, sizeof(first_refused), "%s: %s", redlock_log_level_name(level),
                     message);
    }
}

static void recipe_options(redlock_options *o)
{
    h_test_options(o);
    o->key_prefix = "locks:"; /* the recipe's key pattern is ~locks:* */
    o->log_fn = on_log;
}

static void expect_nothing_refused(void)
{
    if (refused_lines != 0)
        fail_msg("%u log line(s) of a refusal, the first: %s", refused_lines, first_refused);
}

/* Won, with no error vote: a right the recipe lacks would be one. (Decided at the quorum: a node
 * may not have voted yet; its key is checked on the server.) */
static void expect_won_cleanly(const char *what, int status, const h_record *rec)
{
    if (status != 0 || rec->votes_error != 0 || rec->votes_no != 0) {
        h_dump_record(what, rec);
        fail_msg("%s: %s with %u yes, %u error", what, redlock_err_name(status), rec->votes_yes,
                 rec->votes_error);
    }
}

static int on_lost_calls;
static void on_lost(redlock_lock *lock, int reason, void *data)
{
    (void)lock;
    (void)reason;
    (void)data;
    on_lost_calls++;
}

static void recipe_runs_whole_api(void **state)
{
    (void)state;
    h_env env;
    start_recipe_servers(&env);
    urls u;
    redlock_options o;
    recipe_options(&o);
    refused_lines = 0;
    redlock_client *c = NULL;
    char err[256];
    assert_int_equal(h_client_urls(&env, locker_urls(&u, &env), 3, &o, &c, err, sizeof(err)), 0);
    h_wait_ready(&env, c);

    h_record rec;
    int rc = h_acquire(&env, c, "api", 10000, NULL, &rec);
    expect_won_cleanly("acquire", rc, &rec);
    redlock_lock *lock = rec.lock;
    const char *token = redlock_lock_token(lock, NULL);
    assert_true(h_wait_holding(&env, "locks:api", 9, token, strlen(token), 3, H_WAIT_MS));

    rc = h_extend(&env, lock, 10000, 0, &rec);
    expect_won_cleanly("extend", rc, &rec);
    h_drain(&env, c); /* every node ran it: the next step deletes a key behind it */

    /* A node that lost the key gets it back (SET inside the extend script). */
    assert_int_equal(h_del(&env, 2, "locks:api", 9), 1);
    rc = h_extend(&env, lock, 10000, REDLOCK_EXTEND_RETAKE, &rec);
    expect_won_cleanly("extend with retake", rc, &rec);
    assert_true(h_wait_holding(&env, "locks:api", 9, token, strlen(token), 3, H_WAIT_MS));

    /* Flushed scripts: EVALSHA is answered NOSCRIPT, and the client sends EVAL. */
    for (unsigned i = 0; i < 3; i++) {
        redisReply *r = fixture_command(&env.cluster, i, "SCRIPT FLUSH");
        assert_non_null(r);
        freeReplyObject(r);
    }
    rc = h_extend(&env, lock, 10000, 0, &rec);
    expect_won_cleanly("extend after SCRIPT FLUSH", rc, &rec);
    /* The inspect script too, by EVAL: every node answers. */
    h_record ins;
    memset(&ins, 0, sizeof(ins));
    assert_int_equal(redlock_inspect(c, "api", 3, h_record_cb, &ins), 0);
    assert_true(h_run_until(&env.loop, &ins.calls, 1, H_WAIT_MS));
    assert_int_equal(ins.status, 0);
    assert_int_equal(ins.votes_yes + ins.votes_no, 3);

    rc = h_release(&env, lock, &rec);
    assert_int_equal(rc, 0);
    assert_int_equal(rec.votes_yes, 3);
    assert_int_equal(rec.votes_error, 0);
    assert_int_equal(h_count_holding(&env, "locks:api", 9, token, strlen(token)), 0);
    redlock_lock_free(lock);

    /* Auto-extension: a 1.5 s ttl held for two extensions. */
    redlock_auto_opts ao;
    redlock_auto_opts_init(&ao);
    redlock_lock_opts lo;
    redlock_lock_opts_init(&lo);
    lo.auto_extend = &ao;
    lo.lost_cb = on_lost;
    on_lost_calls = 0;
    rc = h_acquire(&env, c, "auto", 1500, &lo, &rec);
    expect_won_cleanly("acquire with auto-extension", rc, &rec);
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    while (redlock_lock_extensions(rec.lock) < 2 && on_lost_calls == 0 &&
           redlock_now_us() < give_up)
        h_run_for(&env.loop, 20);
    assert_int_equal(on_lost_calls, 0);
    assert_true(redlock_lock_extensions(rec.lock) >= 2);
    lock = rec.lock;
    rc = h_release(&env, lock, &rec);
    assert_int_equal(rc, 0);
    redlock_lock_free(lock);

    /* A waiter (the queue's scripts) behind a holder, woken by its release; then a set. */
    rc = h_acquire(&env, c, "queued", 10000, NULL, &rec);
    expect_won_cleanly("acquire before a waiter", rc, &rec);
    lock = rec.lock;
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = H_WAIT_MS;
    h_record waiter;
    memset(&waiter, 0, sizeof(waiter));
    assert_int_equal(redlock_acquire(c, "queued", 6, 10000, &wait, h_record_cb, &waiter), 0);
    h_wait_busy_rounds(&env, c, 1);
    if (waiter.votes_error != 0)
        h_dump_record("the waiter's first attempt", &waiter);
    h_release_ok(&env, lock, NULL);
    assert_true(h_run_until(&env.loop, &waiter.calls, 1, H_WAIT_MS));
    expect_won_cleanly("a waiter's acquire", waiter.status, &waiter);
    rc = h_release(&env, waiter.lock, &rec);
    assert_int_equal(rc, 0);
    assert_int_equal(rec.votes_error, 0);
    redlock_lock_free(waiter.lock);
    const void *set[2] = {"set:a", "set:b"};
    size_t set_lens[2] = {5, 5};
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(redlock_acquire_multi(c, set, set_lens, 2, 10000, NULL, h_record_cb, &rec), 0);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    expect_won_cleanly("acquire of a set", rec.status, &rec);
    lock = rec.lock;
    rc = h_release(&env, lock, &rec);
    assert_int_equal(rc, 0);
    assert_int_equal(rec.votes_error, 0);
    redlock_lock_free(lock);
    h_close_client(&env, c);
    expect_nothing_refused();

    /* The blocking client, the same user. */
    redlock_sync *sync = NULL;
    assert_int_equal(redlock_sync_new(locker_urls(&u, &env), 3, &o, &sync, err, sizeof(err)), 0);
    redlock_sync_lock *sl = NULL;
    redlock_report report;
    redlock_report_init(&report);
    assert_int_equal(redlock_sync_acquire(sync, "sync", 4, 10000, NULL, &sl, &report), 0);
    assert_int_equal(redlock_sync_inspect(sync, "sync", 4, &report), 0);
    assert_int_equal(report.votes_error, 0);
    assert_int_equal(redlock_sync_extend(sl, 10000, 0, &report), 0);
    assert_int_equal(redlock_sync_release(sl, &report), 0);
    assert_int_equal(report.votes_error, 0);
    redlock_sync_lock_free(sl);
    redlock_sync_free(sync);
    expect_nothing_refused();
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(h_dbsize(&env, i), 0);
    h_env_stop(&env);
}

/* Two URLs of one server (an address and a host name): with INFO allowed, the client learns
 * the run_ids and keeps the second one down, so the server counts once. */
static void recipe_refuses_one_server_twice(void **state)
{
    (void)state;
    h_env env;
    start_recipe_servers(&env);
    char text[3][256];
    snprintf(text[0], sizeof(text[0]), "redis://locker:%s@127.0.0.1:%d", ACL_PASS,
             env.cluster.servers[0].port);
    snprintf(text[1], sizeof(text[1]), "redis://locker:%s@localhost:%d", ACL_PASS,
             env.cluster.servers[0].port);
    snprintf(text[2], sizeof(text[2]), "redis://locker:%s@127.0.0.1:%d", ACL_PASS,
             env.cluster.servers[1].port);
    const char *ptrs[3] = {text[0], text[1], text[2]};
    redlock_options o;
    recipe_options(&o);
    redlock_client *c = NULL;
    char err[256];
    assert_int_equal(h_client_urls(&env, ptrs, 3, &o, &c, err, sizeof(err)), 0);
    /* Until both have connected, a round may see either of them first; the one that connects
     * second stays down with "same server". Retry until that shows. */
    bool twin_seen = false;
    uint64_t give_up = redlock_now_us() + H_WAIT_MS * 1000;
    while (!twin_seen && redlock_now_us() < give_up) {
        h_record rec;
        int rc = h_acquire(&env, c, "twin", 10000, NULL, &rec);
        for (unsigned i = 0; i < 2; i++)
            twin_seen = twin_seen || strstr(rec.node_error[i], "same server as") != NULL;
        /* Never three yes votes: the server counts once. */
        assert_true(rec.votes_yes <= 2);
        if (rc == 0) {
            h_record rel;
            h_release(&env, rec.lock, &rel);
            redlock_lock_free(rec.lock);
        }
        if (!twin_seen)
            h_run_for(&env.loop, 50);
    }
    assert_true(twin_seen);
    h_env_stop(&env);
}

/* The recipe without +pubsub|numsub, which docs/operations.md calls optional: a release may then
 * not hand the lock to the queue's next waiter (a grant), and must say so only through the
 * waiter's wait, never through its own status. A queued holder's release deletes its keys and
 * reports success (before the rule, its script failed after the delete: ENOQUORUM for a hold that
 * was continuous), and the waiter takes the lock with a round of its own. */
static void recipe_without_numsub_releases_cleanly(void **state)
{
    (void)state;
    char *rules = recommended_rules();
    char *numsub = strstr(rules, " +pubsub|numsub");
    assert_non_null(numsub);
    memmove(numsub, numsub + strlen(" +pubsub|numsub"),
            strlen(numsub + strlen(" +pubsub|numsub")) + 1);
    char conf[1024];
    snprintf(conf, sizeof(conf), "user locker on >%s %s\n", ACL_PASS, rules);
    free(rules);
    h_env env;
    h_env_start(&env, 3, conf);
    urls u;
    redlock_options o;
    recipe_options(&o);
    o.retry_delay_ms = 300;
    redlock_client *holder = NULL, *waiter = NULL;
    assert_int_equal(h_client_urls(&env, locker_urls(&u, &env), 3, &o, &holder, NULL, 0), 0);
    assert_int_equal(h_client_urls(&env, locker_urls(&u, &env), 3, &o, &waiter, NULL, 0), 0);
    redlock_lock_opts wait;
    redlock_lock_opts_init(&wait);
    wait.wait_ms = 20000;
    h_record held, rec = {0};
    assert_int_equal(h_acquire(&env, holder, "queue", 10000, &wait, &held), 0);
    /* Every node holds it before the waiter asks: on a node that had not run the holder's SET
     * yet, the waiter would take the key first (the queue was empty) and the release there
     * would find it not the holder's. */
    size_t token_len = 0;
    const char *token = redlock_lock_token(held.lock, &token_len);
    assert_true(h_wait_holding(&env, "locks:queue", 11, token, token_len, 3, H_WAIT_MS));
    assert_int_equal(redlock_acquire(waiter, "queue", 5, 5000, &wait, h_record_cb, &rec), 0);
    h_wait_busy_rounds(&env, waiter, 1);
    h_record rel;
    int rc = h_release(&env, held.lock, &rel);
    if (rc != 0 || rel.votes_yes != 3)
        h_dump_record("the holder's release", &rel);
    assert_int_equal(rc, 0);
    assert_int_equal(rel.votes_yes, 3);
    redlock_lock_free(held.lock);
    assert_true(h_run_until(&env.loop, &rec.calls, 1, H_WAIT_MS));
    assert_int_equal(rec.status, 0);
    h_release_ok(&env, rec.lock, NULL);
    h_close_client(&env, waiter);
    h_env_stop(&env);
}

int main(void)
{
    h_test_main_init();
    static const struct CMUnitTest tests[] = {
        H_TEST(recipe_runs_whole_api),
        H_TEST(recipe_refuses_one_server_twice),
        H_TEST(recipe_without_numsub_releases_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
