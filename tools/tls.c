/* SPDX-License-Identifier: MIT */
/* tls.c - the tool's TLS settings: --tls-* options, else $REDLOCK_TLS_* (the command line wins),
 * into the client's options; and the library's messages about them in the tool's words. */
#include "tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The option if given, else the environment variable (unset or empty: none); *what names it. */
static const char *pick(const char *option, const char *option_name, const char *env_name,
                        const char **what)
{
    *what = option_name;
    if (option != NULL)
        return option;
    *what = env_name;
    const char *env = getenv(env_name);
    return env != NULL && env[0] != '\0' ? env : NULL;
}

/* A FIFO blocks open(2) until someone writes to it, where no signal handler of the loop can run:
 * a path that is there but not a regular file is refused before anything opens it. */
int tool_regular_file(const char *what, const char *path, char *err, size_t err_len)
{
    struct stat st;
    if (path == NULL || stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return 0; /* a missing file: the opener's message says so */
    char name[200];
    tool_printable(path, strlen(path), name, sizeof(name));
    snprintf(err, err_len, "%s %s: not a regular file (%s)", what, name,
             S_ISFIFO(st.st_mode)   ? "a FIFO"
             : S_ISDIR(st.st_mode)  ? "a directory"
             : S_ISCHR(st.st_mode)  ? "a character device"
             : S_ISBLK(st.st_mode)  ? "a block device"
             : S_ISSOCK(st.st_mode) ? "a socket"
                                    : "not a file");
    return -1;
}

int tool_tls_options(tool *t, char *err, size_t err_len)
{
    const cli_args *a = &t->args;
    const char *what_ca, *what_dir, *what_cert, *what_key;
    t->opts.tls_ca_file = pick(a->tls_ca, "--tls-ca", "REDLOCK_TLS_CA", &what_ca);
    t->opts.tls_ca_dir = pick(a->tls_ca_dir, "--tls-ca-dir", "REDLOCK_TLS_CA_DIR", &what_dir);
    t->opts.tls_cert_file = pick(a->tls_cert, "--tls-cert", "REDLOCK_TLS_CERT", &what_cert);
    t->opts.tls_key_file = pick(a->tls_key, "--tls-key", "REDLOCK_TLS_KEY", &what_key);
    t->opts.tls_server_name = a->tls_server_name;
    t->opts.tls_insecure = a->tls_insecure;
    if (tool_regular_file(what_ca, t->opts.tls_ca_file, err, err_len) != 0 ||
        tool_regular_file(what_cert, t->opts.tls_cert_file, err, err_len) != 0 ||
        tool_regular_file(what_key, t->opts.tls_key_file, err, err_len) != 0)
        return -1;
    return 0;
}

void tool_tls_message(char *msg, size_t len)
{
    static const struct {
        const char *lib, *tool;
    } names[] = {
        {"tls_ca_file", "--tls-ca"},
        {"tls_ca_dir", "--tls-ca-dir"},
        {"tls_cert_file", "--tls-cert"},
        {"tls_key_file", "--tls-key"},
        {"tls_server_name", "--tls-server-name"},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        char *at;
        size_t lib_len = strlen(names[k].lib), tool_len = strlen(names[k].tool);
        while ((at = strstr(msg, names[k].lib)) != NULL) {
            size_t rest = strlen(at + lib_len);
            if ((size_t)(at - msg) + tool_len + rest + 1 > len)
                return;
            memmove(at + tool_len, at + lib_len, rest + 1);
            memcpy(at, names[k].tool, tool_len);
        }
    }
}
