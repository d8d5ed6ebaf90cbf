/* SPDX-License-Identifier: MIT */
/* test_timerq.c - the timer heap against a plain sorted-array oracle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "timerq.h"

#define N 500

static int fired_order[N * 4];
static int fired_count;
static redlock__timer timers[N];

static void on_fire(redlock__timer *t)
{
    fired_order[fired_count++] = (int)(t - timers);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void empty_queue(void **state)
{
    (void)state;
    redlock__timerq q;
    redlock__timerq_init(&q);
    assert_int_equal(redlock__timerq_next_due(&q), UINT64_MAX);
    assert_null(redlock__timerq_pop_due(&q, UINT64_MAX));
    redlock__timer t;
    memset(&t, 0, sizeof(t));
    redlock__timerq_stop(&q, &t); /* stopping an idle timer is harmless */
}

static void equal_due_times_fire_in_start_order(void **state)
{
    (void)state;
    redlock__timerq q;
    redlock__timerq_init(&q);
    memset(timers, 0, sizeof(timers));
    fired_count = 0;
    for (int i = 0; i < 50; i++)
        redlock__timerq_start(&q, &timers[i], 7, on_fire);
    redlock__timer *t;
    while ((t = redlock__timerq_pop_due(&q, 7)) != NULL)
        t->cb(t);
    assert_int_equal(fired_count, 50);
    for (int i = 0; i < 50; i++)
        assert_int_equal(fired_order[i], i);
}

/* Random starts, restarts and stops; pops at random times must match the oracle: every active
 * timer with due <= now, in (due, start order) order. */
static void random_operations_match_oracle(void **state)
{
    (void)state;
    redlock__timerq q;
    redlock__timerq_init(&q);
    memset(timers, 0, sizeof(timers));
    uint64_t due[N];
    uint64_t seq[N];
    bool active[N];
    memset(active, 0, sizeof(active));
    uint64_t next_seq = 0, now = 0;
    for (int step = 0; step < 20000; step++) {
        int i = (int)(next_rand() % N);
        switch (next_rand() % 4) {
        case 0:
        case 1: { /* start or restart */
            uint64_t d = now + next_rand() % 1000;
            redlock__timerq_start(&q, &timers[i], d, on_fire);
            due[i] = d;
            seq[i] = next_seq++;
            active[i] = true;
            break;
        }
        case 2:
            redlock__timerq_stop(&q, &timers[i]);
            active[i] = false;
            break;
        case 3: {
            now += next_rand() % 300;
            for (;;) {
                int best = -1;
                for (int k = 0; k < N; k++)
                    if (active[k] && due[k] <= now &&
                        (best < 0 || due[k] < due[best] ||
                         (due[k] == due[best] && seq[k] < seq[best])))
                        best = k;
                redlock__timer *t = redlock__timerq_pop_due(&q, now);
                if (best < 0) {
                    assert_null(t);
                    break;
                }
                assert_ptr_equal(t, &timers[best]);
                assert_false(t->active);
                active[best] = false;
            }
            break;
        }
        }
        uint64_t min = UINT64_MAX;
        for (int k = 0; k < N; k++)
            if (active[k] && due[k] < min)
                min = due[k];
        assert_int_equal(redlock__timerq_next_due(&q), min);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_queue),
        cmocka_unit_test(equal_due_times_fire_in_start_order),
        cmocka_unit_test(random_operations_match_oracle),
    };
    return cmocka_run_group_tests_name("timerq", tests, NULL, NULL);
}
