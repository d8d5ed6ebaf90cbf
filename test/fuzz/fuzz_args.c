/* SPDX-License-Identifier: MIT */
/* fuzz_args.c - libFuzzer target: the redlock tool's command line (tools/args.c) on arbitrary
 * argument vectors.
 *
 * The input is split at NUL bytes into argv[1..] (argv[0] is "redlock"). Its first byte decides
 * whether $REDLOCK_NODES is set and whether a "--nodes" list is put in front; both lists carry a
 * canary password. Checks, beyond "no crash, no leak, no UB":
 *   - the result is OK, USAGE or NOMEM; on USAGE the message is one non-empty line, terminated
 *     within err_len, never written past it;
 *   - no message ever quotes a node list: the canary password never appears in one (unless the
 *     input itself holds the canary's text elsewhere);
 *   - on OK without --help/--version: a command, a non-empty KEY, 1..64 trimmed non-empty node
 *     URLs (split only where the next starts: a comma in one never precedes a scheme), durations in
 * their documented ranges, run's COMMAND and release/extend's TOKEN as the parser promises;
 *   - every argument that parses as a DURATION prints back (cli_format_duration) as a text that
 *     parses to the same number of milliseconds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

#define MAX_ARGS 40
#define CANARY "Cn4ry-pw"

static const char env_list[] = "redis://u:" CANARY "@h1:1, redis://:" CANARY "@h2:2";
static const char arg_list[] = "redis://:" CANARY "@h3:3";

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Whether a list is split at a comma followed by s: what follows it (blanks aside) is the end,
 * another comma, or a URL's "scheme://" (args.c: a comma inside a password stays). */
static bool split_before(const char *s)
{
    while (blank(*s))
        s++;
    if (*s == '\0' || *s == ',')
        return true;
    size_t n = 0;
    while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
           (n > 0 && ((s[n] >= '0' && s[n] <= '9') || s[n] == '+' || s[n] == '-' || s[n] == '.')))
        n++;
    return n > 0 && strncmp(s + n, "://", 3) == 0;
}

static void check_duration_round_trip(const char *text)
{
    uint64_t ms = 0, again = 0;
    char err[128];
    if (cli_parse_duration(text, &ms, err, sizeof(err)) != 0) {
        CHECK(err[0] != '\0' && memchr(err, '\0', sizeof(err)) != NULL);
        return;
    }
    CHECK(ms <= CLI_DURATION_MAX_MS);
    char printed[32];
    cli_format_duration(ms, printed, sizeof(printed));
    CHECK(cli_parse_duration(printed, &again, err, sizeof(err)) == 0);
    CHECK(again == ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 4096)
        return 0;
    unsigned flags = data[0];
    size_t err_len = 1 + data[1] % 200;
    data += 2;
    size -= 2;
    char *text = malloc(size + 1);
    CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    bool input_has_canary = memmem(data, size, CANARY, sizeof(CANARY) - 1) != NULL;

    char *argv[MAX_ARGS + 4];
    int argc = 0;
    argv[argc++] = (char *)"redlock";
    if (flags & 1) {
        argv[argc++] = (char *)"--nodes";
        argv[argc++] = (char *)arg_list;
    }
    for (size_t start = 0; start <= size && argc < MAX_ARGS;) {
        argv[argc++] = text + start;
        start += strlen(text + start) + 1;
    }
    argv[argc] = NULL;
    const char *env_nodes = (flags & 2) ? env_list : NULL;

    for (int i = 1; i < argc; i++)
        check_duration_round_trip(argv[i]);

    cli_args a;
    char err[256];
    memset(err, 0x55, sizeof(err));
    int rc = cli_parse(&a, argc, argv, env_nodes, err, err_len);
    CHECK(rc == CLI_PARSE_OK || rc == CLI_PARSE_USAGE || rc == CLI_PARSE_NOMEM);
    for (size_t i = err_len; i < sizeof(err); i++)
        CHECK((unsigned char)err[i] == 0x55);
    CHECK(memchr(err, '\0', err_len) != NULL);
    if (rc == CLI_PARSE_USAGE) {
        CHECK(err_len == 1 || err[0] != '\0');
        CHECK(strchr(err, '\n') == NULL);
        CHECK(input_has_canary || strstr(err, CANARY) == NULL);
    }
    if (rc == CLI_PARSE_OK && !a.help && !a.version) {
        CHECK(a.command != CLI_CMD_NONE);
        if (a.command == CLI_CMD_CHECK) /* check [PREFIX]: no KEY, a PREFIX ("" if none) */
            CHECK(a.key == NULL && a.prefix != NULL);
        else
            CHECK(a.key != NULL && a.key_len == strlen(a.key) && a.key_len > 0);
        /* --nodes-file: the file is read after the parse, its nodes are not counted yet */
        CHECK((a.n_nodes >= 1 || a.nodes_file != NULL) && a.n_nodes <= CLI_MAX_NODES);
        for (unsigned i = 0; i < a.n_nodes; i++) {
            size_t len = strlen(a.nodes[i]);
            CHECK(len > 0 && !blank(a.nodes[i][0]) && !blank(a.nodes[i][len - 1]));
            for (const char *c = strchr(a.nodes[i], ','); c != NULL; c = strchr(c + 1, ','))
                CHECK(c != a.nodes[i] && !split_before(c + 1));
        }
        if (a.nodes_from_env)
            CHECK(env_nodes != NULL && a.n_nodes == 2 && strstr(a.nodes[0], "@h1:1") != NULL);
        CHECK(a.ttl_ms >= CLI_TTL_MIN_MS && a.ttl_ms <= CLI_DURATION_MAX_MS);
        CHECK(a.wait_ms <= CLI_DURATION_MAX_MS && a.grace_ms <= CLI_DURATION_MAX_MS);
        CHECK(a.node_timeout_ms <= 3600000); /* 0: the library's adaptive timeout */
        if (a.command == CLI_CMD_RUN)
            CHECK(a.child_argv != NULL && a.child_argv[0] != NULL && a.child_argv[0][0] != '\0');
        else
            CHECK(a.child_argv == NULL);
        if (a.command == CLI_CMD_RELEASE || a.command == CLI_CMD_EXTEND)
            CHECK(a.token != NULL && a.token_len == strlen(a.token) && a.token_len >= 1 &&
                  a.token_len <= 256);
        else
            CHECK(a.token == NULL);
    }
    cli_args_free(&a);
    free(text);
    return 0;
}
