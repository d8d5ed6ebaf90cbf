/* SPDX-License-Identifier: MIT */
/* args.c - the command line of the redlock tool (see args.h). */
#include "args.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The message is one line whatever the user typed: a control byte quoted from the command line
 * (a newline in a KEY, say) is shown as '?'. */
static int usage(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err_len > 0)
        vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < err_len && err[i] != '\0'; i++)
        if ((unsigned char)err[i] < 0x20 || err[i] == 0x7f)
            err[i] = '?';
    return CLI_PARSE_USAGE;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A word the user typed, fit to quote in a message: a stray node URL (forgotten --nodes) may
 * hold a password, so anything with an '@' is not repeated. */
static const char *quotable(const char *word)
{
    return strchr(word, '@') != NULL ? "(not shown: it contains '@')" : word;
}

/* ---- durations ------------------------------------------------------------------------------- */

#define FRACTION_DIGITS_MAX 9

int cli_parse_duration(const char *text, uint64_t *ms, char *err, size_t err_len)
{
    const char *p = text;
    if (*p == '\0')
        return usage(err, err_len, "empty duration (expected e.g. 500ms, 10s, 2m, 1h)");
    if (*p == '-')
        return usage(err, err_len, "'%s': negative durations are not allowed", text);
    if (!is_digit(*p))
        return usage(err, err_len, "'%s' is not a duration (expected e.g. 500ms, 10s, 2m, 1h)",
                     text);
    uint64_t whole = 0;
    bool too_large = false;
    for (; is_digit(*p); p++) {
        if (whole > CLI_DURATION_MAX_MS)
            too_large = true; /* keep scanning: a malformed rest is the better message */
        else
            whole = whole * 10 + (uint64_t)(*p - '0');
    }
    uint64_t fraction = 0, scale = 1;
    if (*p == '.') {
        p++;
        if (!is_digit(*p))
            return usage(err, err_len, "'%s': expected digits after the '.'", text);
        for (unsigned n = 0; is_digit(*p); p++, n++) {
            if (n == FRACTION_DIGITS_MAX)
                return usage(err, err_len, "'%s': more than %d digits after the '.'", text,
                             FRACTION_DIGITS_MAX);
            fraction = fraction * 10 + (uint64_t)(*p - '0');
            scale *= 10;
        }
    }
    uint64_t unit_ms;
    if (*p == '\0' || strcmp(p, "s") == 0)
        unit_ms = 1000; /* a bare number is seconds, as for flock(1) and timeout(1) */
    else if (strcmp(p, "ms") == 0)
        unit_ms = 1;
    else if (strcmp(p, "m") == 0)
        unit_ms = 60 * 1000;
    else if (strcmp(p, "h") == 0)
        unit_ms = 60 * 60 * 1000;
    else
        return usage(err, err_len, "'%s': unknown unit '%s' (use ms, s, m or h)", text, p);
    if (too_large || whole > CLI_DURATION_MAX_MS / unit_ms)
        return usage(err, err_len, "'%s' is too long (at most %llu ms)", text,
                     (unsigned long long)CLI_DURATION_MAX_MS);
    /* fraction < 10^9 and unit_ms <= 3.6e6: the product fits in 64 bits. */
    uint64_t fraction_units = fraction * unit_ms;
    if (fraction_units % scale != 0)
        return usage(err, err_len, "'%s' is not a whole number of milliseconds", text);
    uint64_t total = whole * unit_ms + fraction_units / scale;
    if (total > CLI_DURATION_MAX_MS)
        return usage(err, err_len, "'%s' is too long (at most %llu ms)", text,
                     (unsigned long long)CLI_DURATION_MAX_MS);
    *ms = total;
    return 0;
}

void cli_format_duration(uint64_t ms, char *out, size_t out_len)
{
    static const struct {
        uint64_t ms;
        const char *unit;
    } units[] = {{3600000, "h"}, {60000, "m"}, {1000, "s"}};
    if (ms == 0) {
        snprintf(out, out_len, "0s");
        return;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (ms % units[i].ms == 0) {
            snprintf(out, out_len, "%llu%s", (unsigned long long)(ms / units[i].ms), units[i].unit);
            return;
        }
    }
    snprintf(out, out_len, "%llums", (unsigned long long)ms);
}

/* ---- node lists ------------------------------------------------------------------------------ */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether s starts a URL: "scheme://" (RFC 3986's scheme characters). */
static bool starts_url(const char *s)
{
    if (!is_alpha(*s))
        return false;
    while (is_alpha(*s) || is_digit(*s) || *s == '+' || *s == '-' || *s == '.')
        s++;
    return strncmp(s, "://", 3) == 0;
}

/* Where the URL at p ends: at the first comma followed (blanks aside) by the next URL's scheme,
 * another comma or the end of the list, else at the end; an element that is empty ends at its
 * comma. A comma inside a password (or a query) is part of its URL, so "redis://u:se,cret@h" is
 * one node, not "redis://u:se" (which would read as host "u" and port "se"). */
static const char *url_end(const char *p)
{
    const char *first = p + strspn(p, " \t\r\n");
    if (*first == ',')
        return first;
    for (const char *c = strchr(p, ','); c != NULL; c = strchr(c + 1, ',')) {
        const char *next = c + 1;
        while (is_blank(*next))
            next++;
        if (*next == '\0' || *next == ',' || starts_url(next))
            return c;
    }
    return p + strlen(p);
}

int cli_add_nodes(cli_args *a, const char *list, const char *what, char *err, size_t err_len)
{
    unsigned element = 0;
    const char *p = list;
    for (;;) {
        const char *end = url_end(p);
        element++;
        const char *b = p, *e = end;
        while (b < e && is_blank(*b))
            b++;
        while (e > b && is_blank(e[-1]))
            e--;
        if (b == e)
            return usage(err, err_len, "%s: URL %u of the list is empty", what, element);
        if (a->n_nodes == CLI_MAX_NODES)
            return usage(err, err_len, "%s: more than %d nodes", what, CLI_MAX_NODES);
        char **grown = realloc(a->nodes, (a->n_nodes + 1) * sizeof(*grown));
        if (grown == NULL)
            return CLI_PARSE_NOMEM;
        a->nodes = grown;
        size_t len = (size_t)(e - b);
        char *url = malloc(len + 1);
        if (url == NULL)
            return CLI_PARSE_NOMEM;
        memcpy(url, b, len);
        url[len] = '\0';
        a->nodes[a->n_nodes++] = url;
        if (*end == '\0')
            return CLI_PARSE_OK;
        p = end + 1;
    }
}

int cli_add_node_lines(cli_args *a, const char *text, size_t len, const char *what, char *err,
                       size_t err_len)
{
    size_t pos = 0;
    unsigned line_no = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t line_len = nl != NULL ? (size_t)(nl - line) : len - pos;
        pos += line_len + (nl != NULL ? 1 : 0);
        line_no++;
        size_t b = 0, e = line_len;
        while (b < e && is_blank(line[b]))
            b++;
        while (e > b && is_blank(line[e - 1]))
            e--;
        if (b == e || line[b] == '#')
            continue;
        if (memchr(line + b, '\0', e - b) != NULL)
            return usage(err, err_len, "%s: line %u holds a NUL byte", what, line_no);
        char *copy = malloc(e - b + 1);
        if (copy == NULL)
            return CLI_PARSE_NOMEM;
        memcpy(copy, line + b, e - b);
        copy[e - b] = '\0';
        char where[300];
        snprintf(where, sizeof(where), "%s, line %u", what, line_no);
        unsigned first = a->n_nodes;
        int rc = cli_add_nodes(a, copy, where, err, err_len);
        for (unsigned k = first; k < a->n_nodes; k++)
            a->node_line[k] = line_no;
        /* The line may hold a password: do not leave it in freed memory. */
        volatile char *wipe = copy;
        for (size_t k = 0; k < e - b; k++)
            wipe[k] = '\0';
        free(copy);
        if (rc != CLI_PARSE_OK)
            return rc;
    }
    return CLI_PARSE_OK;
}

static void free_nodes(cli_args *a)
{
    for (unsigned i = 0; i < a->n_nodes; i++) {
        /* The URLs may hold passwords: do not leave them in freed memory. */
        volatile char *s = a->nodes[i];
        for (size_t k = 0; s[k] != '\0'; k++)
            s[k] = '\0';
        free(a->nodes[i]);
    }
    free(a->nodes);
    a->nodes = NULL;
    a->n_nodes = 0;
}

void cli_args_free(cli_args *a)
{
    free_nodes(a);
}

/* ---- options --------------------------------------------------------------------------------- */

typedef enum {
    OPT_NODES,
    OPT_TTL,
    OPT_WAIT,
    OPT_NODE_TIMEOUT,
    OPT_GRACE,
    OPT_QUIET,
    OPT_JSON,
    OPT_HELP,
    OPT_VERSION,
    OPT_TLS_CA,
    OPT_TLS_CA_DIR,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_TLS_SERVER_NAME,
    OPT_TLS_INSECURE,
    OPT_NODES_FILE,
    OPT_DELAYED_RESTART,
    OPT_FENCE,
    OPT_FENCE_DOMAIN,
    OPT_ALL
} opt_id;

typedef struct option_def {
    char short_name;
    const char *long_name;
    bool has_value;
    opt_id id;
} option_def;

/* clang-format off */
static const option_def option_defs[] = {
    {'n', "nodes", true, OPT_NODES}, {'t', "ttl", true, OPT_TTL},
    {'w', "wait", true, OPT_WAIT},   {'T', "node-timeout", true, OPT_NODE_TIMEOUT},
    {'g', "grace", true, OPT_GRACE}, {'q', "quiet", false, OPT_QUIET},
    {'j', "json", false, OPT_JSON},  {'h', "help", false, OPT_HELP},
    {'V', "version", false, OPT_VERSION}, {'f', "fence", false, OPT_FENCE},
    /* Long only (short_name 0 never matches a letter). */
    {0, "tls-ca", true, OPT_TLS_CA},     {0, "tls-ca-dir", true, OPT_TLS_CA_DIR},
    {0, "tls-cert", true, OPT_TLS_CERT}, {0, "tls-key", true, OPT_TLS_KEY},
    {0, "tls-server-name", true, OPT_TLS_SERVER_NAME},
    {0, "tls-insecure", false, OPT_TLS_INSECURE},
    {0, "nodes-file", true, OPT_NODES_FILE},
    {0, "delayed-restart", false, OPT_DELAYED_RESTART},
    {0, "fence-domain", true, OPT_FENCE_DOMAIN},
    {0, "all", false, OPT_ALL},
};
/* clang-format on */
#define N_OPTIONS (sizeof(option_defs) / sizeof(option_defs[0]))

typedef struct parser {
    cli_args *a;
    int argc;
    char **argv;
    int i; /* the next argv element */
    bool nodes_given;
    char *err;
    size_t err_len;
} parser;

static int set_duration(parser *ps, const char *name, const char *value, uint64_t min_ms,
                        uint64_t max_ms, uint64_t *out)
{
    char why[200];
    uint64_t ms;
    if (cli_parse_duration(value, &ms, why, sizeof(why)) != 0)
        return usage(ps->err, ps->err_len, "--%s: %s", name, why);
    char limit[32];
    if (ms < min_ms) {
        cli_format_duration(min_ms, limit, sizeof(limit));
        return usage(ps->err, ps->err_len, "--%s: '%s' is too short (at least %s)", name, value,
                     limit);
    }
    if (ms > max_ms) {
        cli_format_duration(max_ms, limit, sizeof(limit));
        return usage(ps->err, ps->err_len, "--%s: '%s' is too long (at most %s)", name, value,
                     limit);
    }
    *out = ms;
    return CLI_PARSE_OK;
}

static int apply_option(parser *ps, const option_def *def, const char *value)
{
    cli_args *a = ps->a;
    switch (def->id) {
    case OPT_NODES:
        ps->nodes_given = true; /* $REDLOCK_NODES is then not read; repeated -n add up */
        return cli_add_nodes(a, value, "--nodes", ps->err, ps->err_len);
    case OPT_TTL:
        return set_duration(ps, def->long_name, value, CLI_TTL_MIN_MS, CLI_DURATION_MAX_MS,
                            &a->ttl_ms);
    case OPT_WAIT:
        return set_duration(ps, def->long_name, value, 0, CLI_DURATION_MAX_MS, &a->wait_ms);
    case OPT_NODE_TIMEOUT:
        return set_duration(ps, def->long_name, value, 1, 3600000, &a->node_timeout_ms);
    case OPT_GRACE:
        return set_duration(ps, def->long_name, value, 0, CLI_DURATION_MAX_MS, &a->grace_ms);
    case OPT_QUIET:
        a->quiet = true;
        return CLI_PARSE_OK;
    case OPT_JSON:
        a->json = true;
        return CLI_PARSE_OK;
    case OPT_HELP:
        a->help = true;
        return CLI_PARSE_OK;
    case OPT_VERSION:
        a->version = true;
        return CLI_PARSE_OK;
    case OPT_TLS_CA:
    case OPT_TLS_CA_DIR:
    case OPT_TLS_CERT:
    case OPT_TLS_KEY:
    case OPT_TLS_SERVER_NAME: {
        /* The value is never quoted: it may be the path of a key. */
        if (value[0] == '\0')
            return usage(ps->err, ps->err_len, "--%s: empty value", def->long_name);
        const char **slot = def->id == OPT_TLS_CA       ? &a->tls_ca
                            : def->id == OPT_TLS_CA_DIR ? &a->tls_ca_dir
                            : def->id == OPT_TLS_CERT   ? &a->tls_cert
                            : def->id == OPT_TLS_KEY    ? &a->tls_key
                                                        : &a->tls_server_name;
        *slot = value;
        return CLI_PARSE_OK;
    }
    case OPT_TLS_INSECURE:
        a->tls_insecure = true;
        return CLI_PARSE_OK;
    case OPT_NODES_FILE:
        if (value[0] == '\0')
            return usage(ps->err, ps->err_len, "--nodes-file: empty value");
        if (a->nodes_file != NULL)
            return usage(ps->err, ps->err_len, "--nodes-file: given twice");
        ps->nodes_given = true; /* $REDLOCK_NODES is then not read */
        a->nodes_file = value;
        return CLI_PARSE_OK;
    case OPT_DELAYED_RESTART:
        a->delayed_restart = true;
        return CLI_PARSE_OK;
    case OPT_FENCE:
        a->fence = true;
        return CLI_PARSE_OK;
    case OPT_FENCE_DOMAIN:
        if (value[0] == '\0')
            return usage(ps->err, ps->err_len, "--fence-domain: empty value");
        if (strlen(value) > CLI_KEY_MAX)
            return usage(ps->err, ps->err_len, "--fence-domain: longer than %u bytes",
                         (unsigned)CLI_KEY_MAX);
        a->fence = true;
        a->fence_domain = value;
        return CLI_PARSE_OK;
    case OPT_ALL:
        a->release_all = true;
        return CLI_PARSE_OK;
    }
    return CLI_PARSE_OK;
}

static int long_option(parser *ps, const char *arg)
{
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t name_len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    for (size_t k = 0; k < N_OPTIONS; k++) {
        const option_def *def = &option_defs[k];
        if (strlen(def->long_name) != name_len || strncmp(def->long_name, name, name_len) != 0)
            continue;
        if (!def->has_value) {
            if (eq != NULL)
                return usage(ps->err, ps->err_len, "option --%s takes no value", def->long_name);
            return apply_option(ps, def, NULL);
        }
        if (eq != NULL)
            return apply_option(ps, def, eq + 1);
        if (ps->i >= ps->argc)
            return usage(ps->err, ps->err_len, "option --%s needs a value", def->long_name);
        return apply_option(ps, def, ps->argv[ps->i++]);
    }
    /* Quote the name only: the value after '=' may be a URL with a password. */
    return usage(ps->err, ps->err_len, "unknown option '--%.*s' (see redlock --help)",
                 (int)(name_len > 64 ? 64 : name_len), name);
}

static int short_options(parser *ps, const char *arg)
{
    for (const char *p = arg + 1; *p != '\0'; p++) {
        const option_def *def = NULL;
        for (size_t k = 0; k < N_OPTIONS; k++)
            if (option_defs[k].short_name == *p)
                def = &option_defs[k];
        if (def == NULL) {
            unsigned char c = (unsigned char)*p;
            if (c >= 0x20 && c < 0x7f)
                return usage(ps->err, ps->err_len, "unknown option '-%c' (see redlock --help)", *p);
            return usage(ps->err, ps->err_len, "unknown option byte 0x%02x (see redlock --help)",
                         c);
        }
        if (!def->has_value) {
            int rc = apply_option(ps, def, NULL);
            if (rc != CLI_PARSE_OK)
                return rc;
            continue;
        }
        if (p[1] != '\0') /* -t10s */
            return apply_option(ps, def, p + 1);
        if (ps->i >= ps->argc)
            return usage(ps->err, ps->err_len, "option -%c (--%s) needs a value", *p,
                         def->long_name);
        return apply_option(ps, def, ps->argv[ps->i++]);
    }
    return CLI_PARSE_OK;
}

/* Options up to the first word that is not one; "--" is consumed and ends them. */
static int parse_options(parser *ps)
{
    while (ps->i < ps->argc) {
        const char *arg = ps->argv[ps->i];
        if (arg[0] != '-' || arg[1] == '\0') /* a word, or "-" */
            return CLI_PARSE_OK;
        ps->i++;
        if (strcmp(arg, "--") == 0)
            return CLI_PARSE_OK;
        int rc = arg[1] == '-' ? long_option(ps, arg) : short_options(ps, arg);
        if (rc != CLI_PARSE_OK)
            return rc;
    }
    return CLI_PARSE_OK;
}

static const struct {
    const char *name;
    cli_command command;
} commands[] = {
    {"run", CLI_CMD_RUN},       {"acquire", CLI_CMD_ACQUIRE}, {"release", CLI_CMD_RELEASE},
    {"extend", CLI_CMD_EXTEND}, {"status", CLI_CMD_STATUS},   {"check", CLI_CMD_CHECK},
};

static int parse_positionals(parser *ps)
{
    cli_args *a = ps->a;
    if (ps->i >= ps->argc)
        return usage(ps->err, ps->err_len,
                     "missing command: run, acquire, release, extend, status or check (see "
                     "redlock --help)");
    const char *word = ps->argv[ps->i++];
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        if (strcmp(word, commands[k].name) == 0)
            a->command = commands[k].command;
    if (a->command == CLI_CMD_NONE)
        return usage(ps->err, ps->err_len,
                     "unknown command '%s': use run, acquire, release, extend, status or check",
                     quotable(word));
    int rc = parse_options(ps);
    if (rc != CLI_PARSE_OK || a->help || a->version)
        return rc;
    if (a->command == CLI_CMD_CHECK) {
        /* check [PREFIX]: the probe key starts with PREFIX (to match the ACL's key pattern). */
        a->prefix = ps->i < ps->argc ? ps->argv[ps->i++] : "";
        if (ps->i < ps->argc)
            return usage(ps->err, ps->err_len,
                         "check: unexpected argument '%s' (options go before PREFIX)",
                         quotable(ps->argv[ps->i]));
        return CLI_PARSE_OK;
    }
    if (ps->i >= ps->argc)
        return usage(ps->err, ps->err_len, "%s: missing KEY", word);
    a->key = ps->argv[ps->i++];
    a->key_len = strlen(a->key);
    if (a->key_len == 0)
        return usage(ps->err, ps->err_len, "%s: KEY must not be empty", word);
    if (a->key_len > CLI_KEY_MAX) /* the library's message (lib/lock/client.h) */
        return usage(ps->err, ps->err_len,
                     "%s: KEY is %zu bytes, over REDLOCK_RESOURCE_MAX (%u): lock a digest of it "
                     "instead",
                     word, a->key_len, (unsigned)CLI_KEY_MAX);

    if (a->fence_domain != NULL && a->command != CLI_CMD_RUN && a->command != CLI_CMD_ACQUIRE)
        return usage(ps->err, ps->err_len,
                     "%s: --fence-domain is for acquire and run (status reads KEY's own counter)",
                     word);
    if (a->command == CLI_CMD_RUN) {
        if (ps->i >= ps->argc || strcmp(ps->argv[ps->i], "--") != 0)
            return usage(ps->err, ps->err_len,
                         "run: expected '--' and a COMMAND after KEY (redlock run KEY -- COMMAND)");
        ps->i++;
        if (ps->i >= ps->argc)
            return usage(ps->err, ps->err_len, "run: missing COMMAND after '--'");
        if (ps->argv[ps->i][0] == '\0')
            return usage(ps->err, ps->err_len, "run: COMMAND must not be empty");
        a->child_argv = ps->argv + ps->i; /* argv[argc] is NULL */
        ps->i = ps->argc;
        return CLI_PARSE_OK;
    }
    if (a->command == CLI_CMD_RELEASE || a->command == CLI_CMD_EXTEND) {
        if (ps->i >= ps->argc)
            return usage(ps->err, ps->err_len, "%s: missing TOKEN (as printed by acquire)", word);
        a->token = ps->argv[ps->i++];
        a->token_len = strlen(a->token);
        if (a->token_len == 0)
            return usage(ps->err, ps->err_len, "%s: TOKEN must not be empty", word);
        if (a->token_len > 256)
            return usage(ps->err, ps->err_len, "%s: TOKEN is longer than 256 bytes", word);
    }
    if (ps->i < ps->argc)
        return usage(ps->err, ps->err_len, "%s: unexpected argument '%s' (options go before KEY)",
                     word, quotable(ps->argv[ps->i]));
    return CLI_PARSE_OK;
}

int cli_parse(cli_args *a, int argc, char **argv, const char *env_nodes, char *err, size_t err_len)
{
    memset(a, 0, sizeof(*a));
    a->ttl_ms = CLI_DEFAULT_TTL_MS;
    a->node_timeout_ms = CLI_DEFAULT_NODE_TIMEOUT_MS;
    a->grace_ms = CLI_DEFAULT_GRACE_MS;
    if (err_len > 0)
        err[0] = '\0';
    parser ps = {a, argc, argv, 1, false, err, err_len};
    int rc = parse_options(&ps);
    if (rc != CLI_PARSE_OK || a->help || a->version)
        return rc;
    rc = parse_positionals(&ps);
    if (rc != CLI_PARSE_OK || a->help || a->version)
        return rc;
    if (!ps.nodes_given) {
        if (env_nodes == NULL || env_nodes[strspn(env_nodes, " \t\r\n")] == '\0')
            return usage(err, err_len, "no nodes: give --nodes URL[,URL...] or set REDLOCK_NODES");
        a->nodes_from_env = true;
        return cli_add_nodes(a, env_nodes, "REDLOCK_NODES", err, err_len);
    }
    return CLI_PARSE_OK;
}

/* ---- --help ----------------------------------------------------------------------------- */

static const char help_usage[] =
    "usage: redlock [options] run KEY -- COMMAND [ARG...]\n"
    "       redlock [options] acquire KEY\n"
    "       redlock [options] release KEY TOKEN\n"
    "       redlock [options] extend KEY TOKEN\n"
    "       redlock [options] status KEY\n"
    "       redlock [options] check [PREFIX]\n"
    "\n"
    "A distributed lock over N Redis masters (Redlock): flock(1) for a fleet.\n"
    "\n"
    "commands:\n"
    "  run      take the lock, keep it alive while COMMAND runs, release it when COMMAND exits;\n"
    "           exit with COMMAND's status (128+N if it died of signal N), or 70 if the lock was\n"
    "           lost or the release finds it had lapsed. COMMAND gets REDLOCK_KEY and\n"
    "           REDLOCK_TOKEN (and REDLOCK_FENCE with --fence) in its environment, not\n"
    "           REDLOCK_NODES. If the lock is lost, COMMAND gets SIGTERM, then SIGKILL after\n"
    "           --grace. SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH\n"
    "           and SIGCONT are forwarded to COMMAND; if it dies of one of them, redlock\n"
    "           releases the lock and dies of it too\n"
    "  acquire  take the lock and leave it held for its ttl; print one JSON line with the token\n"
    "  release  release a lock taken with acquire (compare-and-delete: only with its token);\n"
    "           exit 70 if the lock had lapsed (fewer than a quorum still held the token)\n"
    "  extend   extend a held lock to --ttl from now (compare-and-pexpire)\n"
    "  status   show who holds KEY on every node, and its remaining ttl\n"
    "  check    check that every node is fit to hold locks (a master, reachable, the commands\n"
    "           allowed, no eviction, persistence, one server per URL); one JSON line on\n"
    "           stdout, a table on stderr; exit 0 all well, 1 warnings only, 69 a node cannot\n"
    "           serve locks. It sets and deletes one probe key, PREFIX + \"redlock-check-\" +\n"
    "           random hex (give the start of your lock keys, to match the ACL's key pattern)\n"
    "\n";

/* In parts: C11 compilers need not take a literal over 4095 bytes. */
static const char help_options[] =
    "options (before KEY; '--' ends them, so a KEY may start with '-'):\n"
    "  -n, --nodes URL[,URL...]    Redis masters, e.g. redis://:secret@10.0.1.5:6379/0;\n"
    "                              default $REDLOCK_NODES; may be repeated\n"
    "  --nodes-file FILE           read node URLs from FILE, one per line ('#' comments): keeps\n"
    "                              passwords out of argv and the environment\n"
    "  -t, --ttl DURATION          lock ttl, also for extend (default 10s, at least 10ms)\n"
    "  -w, --wait DURATION         wait up to this long in the lock's queue, in turn with the\n"
    "                              other waiters; a line on stderr now and then says what the\n"
    "                              nodes say (default 0: one try)\n"
    "  -T, --node-timeout DURATION per-request deadline on each node, including connection\n"
    "                              setup on the first request (default 0: adapts, at most 1h)\n"
    "  -g, --grace DURATION        run: time between SIGTERM and SIGKILL when the lock is\n"
    "                              lost (default 5s)\n"
    "  -q, --quiet                 nothing on stderr unless something is wrong (a busy lock\n"
    "                              is not: it is silent)\n"
    "  -j, --json                  run: print one JSON line on stdout at the end, after\n"
    "                              COMMAND exited (the other commands always print one)\n"
    "  -f, --fence                 take a fence with the lock, a number that grows\n"
    "                              with every holder: acquire prints it (\"fence\"), run\n"
    "                              exports REDLOCK_FENCE; status shows each node's counter\n"
    "  --fence-domain NAME         acquire, run: --fence, from the counter NAME, shared by every\n"
    "                              KEY that names it (no counter key of each KEY's own)\n"
    "  --tls-ca FILE               rediss:// nodes: CA certificates (PEM) to verify them with;\n"
    "                              default $REDLOCK_TLS_CA, else the system's CA store\n"
    "  --tls-ca-dir DIR            a directory of hashed CA certificates ($REDLOCK_TLS_CA_DIR)\n"
    "  --tls-cert FILE             client certificate for mutual TLS ($REDLOCK_TLS_CERT) ...\n"
    "  --tls-key FILE              ... and its key, without a passphrase ($REDLOCK_TLS_KEY)\n"
    "  --tls-server-name NAME      verify this name (and send it as SNI) instead of each host\n"
    "  --tls-insecure              do not verify the nodes' certificates (never in production)\n"
    "  --delayed-restart           check: restarted nodes are kept out for longer than the\n"
    "                              longest ttl, so no AOF is needed (no warning without it)\n"
    "  --all                       release, run: report the release once every node answered\n"
    "                              (default: once a quorum decided it; the tool exits after\n"
    "                              every node's delete either way)\n"
    "  -h, --help                  this text\n"
    "  -V, --version               versions of the tool, the library, libuv and TLS\n"
    "\n";
static const char help_more[] =
    "DURATION is an integer or decimal with a unit: ms, s, m or h (500ms, 1.5s, 2m, 1h);\n"
    "a bare number is seconds.\n"
    "\n"
    "nodes: redis://, rediss:// (TLS: see the --tls-* options), unix://, and cluster:// or\n"
    "clusters:// for a Redis Cluster that counts as one node. A node whose TLS handshake fails\n"
    "votes error with the reason. Passwords in node URLs never appear in any output.\n"
    "\n"
    "environment: REDLOCK_NODES (the nodes, when no --nodes or --nodes-file is given);\n"
    "REDLOCK_TLS_CA, REDLOCK_TLS_CA_DIR, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY (the --tls-* files);\n"
    "run sets REDLOCK_KEY, REDLOCK_TOKEN and, with --fence, REDLOCK_FENCE for COMMAND.\n"
    "\n"
    "acquire, release, extend and status print one JSON line on stdout, also when they fail.\n"
    "See docs/cli.md and redlock(1).\n"
    "\n"
    "exit status:\n";

typedef struct exit_status {
    const char *shown, *help;
} exit_status;

static const exit_status exit_statuses[] = {
#define CLI_EXIT_HELP_(name, status, shown, help) {shown, help},
    CLI_EXIT_MAP(CLI_EXIT_HELP_)
#undef CLI_EXIT_HELP_
};

/* One exit status: "   64  text", the text wrapped at 92 columns under itself. */
static int write_exit_status(FILE *out, const exit_status *e)
{
    int indent = fprintf(out, "%5s  ", e->shown);
    if (indent < 0)
        return -1;
    const char *p = e->help;
    int col = indent;
    while (*p != '\0') {
        size_t word = strcspn(p, " ");
        if (col > indent && col + 1 + (int)word > 92) {
            if (fprintf(out, "\n%*s", indent, "") < 0)
                return -1;
            col = indent;
        } else if (col > indent) {
            if (fputc(' ', out) == EOF)
                return -1;
            col++;
        }
        if (fwrite(p, 1, word, out) != word)
            return -1;
        col += (int)word;
        p += word;
        p += strspn(p, " ");
    }
    return fputc('\n', out) == EOF ? -1 : 0;
}

int cli_write_help(FILE *out)
{
    if (fputs(help_usage, out) == EOF || fputs(help_options, out) == EOF ||
        fputs(help_more, out) == EOF)
        return -1;
    for (size_t i = 0; i < sizeof(exit_statuses) / sizeof(exit_statuses[0]); i++)
        if (write_exit_status(out, &exit_statuses[i]) != 0)
            return -1;
    return 0;
}

const char *cli_option_name(unsigned i)
{
    return i < N_OPTIONS ? option_defs[i].long_name : NULL;
}
