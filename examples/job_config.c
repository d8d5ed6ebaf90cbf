/* SPDX-License-Identifier: MIT */
/* job_config.c - the job runners' command line (job_config.h). */
#define _POSIX_C_SOURCE 200809L
#include "job_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS 1000000
#define MAX_MS (UINT64_C(24) * 3600 * 1000) /* a day */

static int usage(const char *prog, const char *why)
{
    fprintf(stderr,
            "%s: %s\n"
            "usage: %s --nodes URL,URL,... --store URL [--resource NAME] [--jobs M]\n"
            "       [--work-ms MS] [--ttl-ms MS] [--wait-ms MS] [--timeout-ms MS]\n",
            prog, why, prog);
    return 2;
}

/* A whole number in 1..max. */
static bool parse_number(const char *text, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || n < 1 || n > max)
        return false;
    *out = n;
    return true;
}

/* Split "URL,URL,..." (copied) into cfg->node_urls. */
static bool parse_nodes(job_config *cfg, const char *list)
{
    free(cfg->nodes_copy);
    cfg->nodes_copy = strdup(list);
    cfg->n_nodes = 0;
    if (cfg->nodes_copy == NULL)
        return false;
    for (char *save = NULL, *url = strtok_r(cfg->nodes_copy, ",", &save); url != NULL;
         url = strtok_r(NULL, ",", &save)) {
        if (cfg->n_nodes == REDLOCK_MAX_NODES)
            return false;
        cfg->node_urls[cfg->n_nodes++] = url;
    }
    return cfg->n_nodes > 0;
}

int job_config_parse(job_config *cfg, int argc, char **argv)
{
    static const struct option options[] = {
        {"nodes", required_argument, NULL, 'n'},
        {"store", required_argument, NULL, 's'},
        {"resource", required_argument, NULL, 'r'},
        {"jobs", required_argument, NULL, 'j'},
        {"work-ms", required_argument, NULL, 'w'},
        {"ttl-ms", required_argument, NULL, 't'},
        {"wait-ms", required_argument, NULL, 'W'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0},
    };
    *cfg = (job_config){.resource = "job:nightly-report",
                        .jobs = 1,
                        .work_ms = 100,
                        .ttl_ms = 10000,
                        .wait_ms = 60000};
    const char *prog = argc > 0 ? argv[0] : "job_runner";
    uint64_t jobs = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 'n':
            if (!parse_nodes(cfg, optarg))
                return usage(prog, "--nodes: 1 to 64 URLs, separated by commas");
            break;
        case 's':
            cfg->store_url = optarg;
            break;
        case 'r':
            cfg->resource = optarg;
            if (cfg->resource[0] == '\0')
                return usage(prog, "--resource must not be empty");
            break;
        case 'j':
            if (!parse_number(optarg, MAX_JOBS, &jobs))
                return usage(prog, "--jobs: a number from 1 to 1000000");
            cfg->jobs = (unsigned)jobs;
            break;
        case 'w':
        case 't':
        case 'W':
        case 'T':
            if (!parse_number(optarg, MAX_MS,
                              opt == 'w'   ? &cfg->work_ms
                              : opt == 't' ? &cfg->ttl_ms
                              : opt == 'W' ? &cfg->wait_ms
                                           : &cfg->timeout_ms))
                return usage(prog, "--work-ms, --ttl-ms, --wait-ms, --timeout-ms: 1 ms to a day");
            break;
        default:
            return usage(prog, "unknown option");
        }
    }
    if (optind != argc || cfg->n_nodes == 0 || cfg->store_url == NULL)
        return usage(prog, "--nodes and --store are required");
    return 0;
}

void job_config_client_options(const job_config *cfg, redlock_options *opts)
{
    redlock_options_init(opts);
    if (cfg->timeout_ms > 0)
        opts->node_timeout_ms = opts->connect_timeout_ms = cfg->timeout_ms;
}

void job_config_free(job_config *cfg)
{
    free(cfg->nodes_copy);
    cfg->nodes_copy = NULL;
}
