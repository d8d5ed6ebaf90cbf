/* SPDX-License-Identifier: MIT */
/* tls.c - the tool's TLS settings: --tls-* options, else $REDLOCK_TLS_* (the command line wins),
 * into the client's options; and the library's messages about them in the tool's words. */
#include "tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The option if given, else the environment variable (unset or empty: none). */
static const char *pick(const char *option, const char *env_name)
{
    if (option != NULL)
        return option;
    const char *env = getenv(env_name);
    return env != NULL && env[0] != '\0' ? env : NULL;
}

void tool_tls_options(tool *t)
{
    const cli_args *a = &t->args;
    t->opts.tls_ca_file = pick(a->tls_ca, "REDLOCK_TLS_CA");
    t->opts.tls_ca_dir = pick(a->tls_ca_dir, "REDLOCK_TLS_CA_DIR");
    t->opts.tls_cert_file = pick(a->tls_cert, "REDLOCK_TLS_CERT");
    t->opts.tls_key_file = pick(a->tls_key, "REDLOCK_TLS_KEY");
    t->opts.tls_server_name = a->tls_server_name;
    t->opts.tls_insecure = a->tls_insecure;
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
