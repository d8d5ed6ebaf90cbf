/* SPDX-License-Identifier: MIT */
/* test_readme.c - the README's first example is examples/minimal.c, compiles clean under
 * -Wall -Wextra -Werror (no unused parameter: the project's own build turns that warning off),
 * and does what the README shows against three real servers: the work runs holding the lock,
 * the hold ends released, and nothing is left on the nodes.
 *
 * Run by meson with: the minimal executable, README.md, examples/minimal.c, the public include
 * directory, then the C compiler's command (one or more words). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* posix_spawn, pipe2 */
#endif

#include <fcntl.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

extern char **environ;

static const char *minimal_path, *readme_path, *source_path, *include_dir;
static char **cc_argv; /* the compiler's command */
static int cc_argc;

/* The whole file, NUL-terminated (malloc'ed). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

/* The README's first ```c block (malloc'ed). */
static char *first_c_block(void)
{
    char *text = slurp(readme_path);
    char *start = strstr(text, "\n```c\n");
    assert_non_null(start);
    start += 6;
    char *end = strstr(start, "\n```\n");
    assert_non_null(end);
    end[1] = '\0';
    char *block = strdup(start);
    free(text);
    return block;
}

/* Run argv (NULL-terminated) with its stdout into out (NUL-terminated); returns its exit code, -1
 * if it did not exit. */
static int run(char *const *argv, char *out, size_t out_len)
{
    int pipefd[2];
    assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipefd[1]);
    assert_int_equal(rc, 0);
    size_t len = 0;
    ssize_t n;
    while ((n = read(pipefd[0], out + len, out_len - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(pipefd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The block is minimal.c without its license line. */
static void readme_block_is_minimal_c(void **state)
{
    (void)state;
    char *block = first_c_block();
    char *source = slurp(source_path);
    char *body = strchr(source, '\n');
    assert_non_null(body);
    if (strcmp(block, body + 1) != 0)
        fail_msg("README.md's first example differs from examples/minimal.c: copy it over");
    free(block);
    free(source);
}

/* The block compiles as C11 with -Wall -Wextra -Werror -Wpedantic against the public header. */
static void readme_block_compiles_clean(void **state)
{
    (void)state;
    char *block = first_c_block();
    char src[] = "/tmp/redlock-readme-XXXXXX.c";
    int fd = mkstemps(src, 2);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, block, strlen(block)), (ssize_t)strlen(block));
    close(fd);
    free(block);
    char obj[sizeof(src) + 2];
    snprintf(obj, sizeof(obj), "%s.o", src);
    char include[4096];
    snprintf(include, sizeof(include), "-I%s", include_dir);
    char *argv[64];
    int argc = 0;
    for (int i = 0; i < cc_argc && argc < 48; i++)
        argv[argc++] = cc_argv[i];
    const char *flags[] = {"-std=c11", "-Wall", "-Wextra", "-Werror", "-Wpedantic",
                           include,    "-c",    src,       "-o",      obj};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        argv[argc++] = (char *)flags[i];
    argv[argc] = NULL;
    char out[4096];
    int rc = run(argv, out, sizeof(out));
    unlink(src);
    unlink(obj);
    assert_int_equal(rc, 0);
}

/* It runs as the README shows: the work holds the lock, the hold ends released, no key is left
 * (its release waits for a quorum, the last node's delete lands a moment later). */
static void minimal_runs_as_shown(void **state)
{
    (void)state;
    fixture_cluster cluster;
    assert_int_equal(fixture_start(&cluster, 3, NULL), 0);
    char urls[3][200];
    char *argv[5] = {(char *)minimal_path};
    for (unsigned i = 0; i < 3; i++) {
        /* Seconds, not the default 50 ms: nothing here is slow on purpose. */
        snprintf(urls[i], sizeof(urls[i]), "%s?timeout_ms=5000", cluster.urls[i]);
        argv[i + 1] = urls[i];
    }
    argv[4] = NULL;
    char out[4096];
    int rc = run(argv, out, sizeof(out));
    char copy[sizeof(out)];
    snprintf(copy, sizeof(copy), "%s", out);
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save))
        printf("# %s\n", l); /* TAP: each line of the example's output a comment */
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "nightly-report: locked, token "));
    assert_non_null(strstr(out, "nightly-report: released (success)\n"));
    long long deadline = fixture_now_ms() + 10000;
    for (unsigned i = 0; i < 3; i++) {
        for (;;) {
            redisReply *r = fixture_command(&cluster, i, "EXISTS nightly-report");
            assert_non_null(r);
            long long n = r->integer;
            freeReplyObject(r);
            if (n == 0)
                break;
            assert_true(fixture_now_ms() < deadline);
            fixture_sleep_ms(10);
        }
    }
    fixture_stop(&cluster);
}

static int teardown(void **state)
{
    (void)state;
    fixture_stop_all();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s MINIMAL README SOURCE INCLUDE_DIR CC...\n", argv[0]);
        return 2;
    }
    minimal_path = argv[1];
    readme_path = argv[2];
    source_path = argv[3];
    include_dir = argv[4];
    cc_argv = argv + 5;
    cc_argc = argc - 5;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readme_block_is_minimal_c),
        cmocka_unit_test(readme_block_compiles_clean),
        cmocka_unit_test_teardown(minimal_runs_as_shown, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
