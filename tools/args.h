/* SPDX-License-Identifier: MIT */
/* args.h - the command line of the redlock tool: durations, node lists, options, commands, exit
 * statuses and the help text.
 *
 * Pure functions (cli_write_help aside, which writes to a stream): no library calls, no globals,
 * so the unit tests drive them directly and every usage error is found before the tool touches
 * the network. Error texts never quote a node
 * URL (it may hold a password); they name the URL by its position instead. */
#ifndef REDLOCK_TOOL_ARGS_H
#define REDLOCK_TOOL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The tool's exit statuses: XX(name, status, shown, help). The one source of them: it gives the
 * EXIT_* enum and --help's table, and test/cli/test_cli_args.c checks that docs/cli.md and the man
 * page (docs/redlock.1.scd) list exactly these statuses, written as `shown`. */
#define CLI_EXIT_MAP(XX)                                                                           \
    XX(OK_, 0, "0", "success (run: COMMAND's own status)")                                         \
    XX(CHECK_WARN, 1, "1", "check: every node can serve locks, with warnings")                     \
    XX(USAGE, 64, "64",                                                                            \
       "usage error: bad option, duration, key, node URL, duplicate node; "                        \
       "nothing sent")                                                                             \
    XX(UNAVAILABLE, 69, "69",                                                                      \
       "no quorum: too many nodes failed or were too slow (ENOQUORUM, "                            \
       "EEXPIRED); check: a node cannot serve locks")                                              \
    XX(LOST, 70, "70",                                                                             \
       "the lock was lost or had lapsed (ELOST): run: lost while COMMAND ran, "                    \
       "or found lapsed by the final release; release: it had lapsed; extend: "                    \
       "it is gone")                                                                               \
    XX(OSERR, 71, "71", "system error (out of memory, no randomness, cannot write the result)")    \
    XX(BUSY, 75, "75", "the lock is held by someone else (EBUSY), also after --wait")              \
    XX(CANNOT_EXEC, 126, "126", "run: COMMAND could not be executed")                              \
    XX(NOT_FOUND, 127, "127", "run: COMMAND not found")                                            \
    XX(SIGNAL_BASE, 128, "128+N",                                                                  \
       "run: COMMAND died of signal N; or redlock got N while "                                    \
       "waiting for the lock or a node, cleaned up, and died of it "                               \
       "itself (so a shell loop stops on Ctrl-C)")

enum {
#define CLI_EXIT_ENUM_(name, status, shown, help) EXIT_##name = (status),
    CLI_EXIT_MAP(CLI_EXIT_ENUM_)
#undef CLI_EXIT_ENUM_
};

/* The largest duration accepted (2^42 ms, about 139 years: the library's ttl limit). */
#define CLI_DURATION_MAX_MS (UINT64_C(1) << 42)
#define CLI_MAX_NODES 64 /* REDLOCK_MAX_NODES */
/* REDLOCK_RESOURCE_MAX: a longer KEY is refused before anything is sent. */
#define CLI_KEY_MAX 16384

/* A shorter ttl leaves no room for the drift allowance (ttl/100 + 2 ms) and the auto-extension's
 * lost margin (ttl/10, at least 5 ms). */
#define CLI_TTL_MIN_MS 10
#define CLI_DEFAULT_TTL_MS 10000
#define CLI_DEFAULT_NODE_TIMEOUT_MS 0 /* the library's: adaptive (redlock.h, node_timeout_ms) */
/* check's deadline per command without -T: the library's first adaptive one */
#define CLI_CHECK_TIMEOUT_MS 1000
#define CLI_DEFAULT_GRACE_MS 5000

typedef enum {
    CLI_CMD_NONE = 0,
    CLI_CMD_RUN,
    CLI_CMD_ACQUIRE,
    CLI_CMD_RELEASE,
    CLI_CMD_EXTEND,
    CLI_CMD_STATUS,
    CLI_CMD_CHECK
} cli_command;

typedef struct cli_args {
    cli_command command;
    const char *key; /* borrowed from argv; non-empty */
    size_t key_len;
    const char *token; /* release, extend: borrowed from argv; non-empty */
    size_t token_len;
    char **child_argv; /* run: the COMMAND and its arguments, NULL-terminated, borrowed */
    char **nodes;      /* owned: n_nodes malloc'ed URLs (trimmed, never empty) */
    unsigned n_nodes;
    bool nodes_from_env;    /* the list came from $REDLOCK_NODES */
    const char *nodes_file; /* --nodes-file: borrowed from argv; read by the tool (the parser
                               does no IO), whose URLs then add to those of --nodes */
    unsigned node_line[CLI_MAX_NODES]; /* the file's line of each node from it, else 0 */
    uint64_t ttl_ms;
    uint64_t wait_ms;
    uint64_t node_timeout_ms;
    uint64_t grace_ms;
    bool quiet;
    bool json;    /* --json: run prints a JSON line at its end (the others always print one) */
    bool help;    /* --help was given: print the help, do nothing else */
    bool version; /* --version was given */
    /* TLS for rediss:// nodes, borrowed from argv (NULL when not given; the tool then reads
     * $REDLOCK_TLS_CA, $REDLOCK_TLS_CA_DIR, $REDLOCK_TLS_CERT, $REDLOCK_TLS_KEY). */
    const char *tls_ca;
    const char *tls_ca_dir;
    const char *tls_cert;
    const char *tls_key;
    const char *tls_server_name;
    bool tls_insecure;
    /* check: the start of the probe key (borrowed from argv; "" when not given), and whether
     * restarted nodes are known to be kept out for longer than the longest ttl. */
    const char *prefix;
    bool delayed_restart;
    bool fence;               /* --fence: take a fence (acquire, run); status shows the counters */
    const char *fence_domain; /* --fence-domain: borrowed from argv; NULL: KEY's own counter */
    bool release_all;         /* --all: a release reports every node's answer, not the quorum's */
} cli_args;

/* Results of cli_parse. */
#define CLI_PARSE_OK 0
#define CLI_PARSE_USAGE (-1) /* err holds one line (no "redlock: " prefix, no newline) */
#define CLI_PARSE_NOMEM (-2)

/* Parse DURATION: digits, an optional decimal fraction, and an optional unit: ms, s, m, h (no
 * unit: seconds, as flock(1) and timeout(1) read it). "1.5s" is 1500 ms; a value that is not a
 * whole number of milliseconds ("1.5ms"), a negative, empty, overflowing (> CLI_DURATION_MAX_MS)
 * or otherwise malformed text is refused. Returns 0 and sets *ms, or -1 with a message in err
 * (quoting text, which is not secret). */
int cli_parse_duration(const char *text, uint64_t *ms, char *err, size_t err_len);

/* Append the URLs of a comma-separated list to a->nodes: each element is trimmed of blanks;
 * an empty element or more than CLI_MAX_NODES nodes in all is an error. what names the list in
 * messages ("--nodes", "REDLOCK_NODES"). Returns CLI_PARSE_OK, CLI_PARSE_USAGE (err set; the
 * list is never quoted, it may hold passwords) or CLI_PARSE_NOMEM. */
int cli_add_nodes(cli_args *a, const char *list, const char *what, char *err, size_t err_len);

/* Append the URLs of a node file's text (len bytes, not NUL-terminated): one URL per line, or a
 * comma-separated list per line as --nodes takes; blank lines and lines starting with '#' are
 * skipped. what names the file in messages, which give the line number and never its text;
 * a->node_line[] gets each added node's line. Returns as cli_add_nodes. */
int cli_add_node_lines(cli_args *a, const char *text, size_t len, const char *what, char *err,
                       size_t err_len);

/* Parse the whole command line (argv[0] is the program). Options come before the command or
 * between the command and KEY; "--" ends them (so a KEY may start with '-'). run then needs
 * "--" and a COMMAND. env_nodes is $REDLOCK_NODES (NULL if unset), used when no --nodes is
 * given. a is overwritten; free it with cli_args_free in every case. With --help or --version
 * the rest of the line is not checked. */
int cli_parse(cli_args *a, int argc, char **argv, const char *env_nodes, char *err, size_t err_len);

void cli_args_free(cli_args *a);

/* Write a duration in ms as the shortest exact text: "10s", "500ms", "2m", "1h". */
void cli_format_duration(uint64_t ms, char *out, size_t out_len);

/* The long name of option i of the parser ("nodes", "ttl", ...), NULL past the last. */
const char *cli_option_name(unsigned i);

/* Write --help's text (usage, commands, options, exit statuses from CLI_EXIT_MAP) to out.
 * Returns 0, or -1 when writing failed. */
int cli_write_help(FILE *out);

#endif /* REDLOCK_TOOL_ARGS_H */
