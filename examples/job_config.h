/* SPDX-License-Identifier: MIT */
/* job_config.h - the job runners' command line (job_runner_async.c, job_runner_sync.c):
 *
 *   job_runner_... --nodes URL,URL,... --store URL [--resource NAME] [--jobs M] [--work-ms MS]
 *                  [--ttl-ms MS] [--wait-ms MS] [--timeout-ms MS]
 *
 *   --nodes URL,...   the lock nodes, independent Redis masters
 *   --store URL       the store's Redis server (job_store.h)
 *   --resource NAME   the lock's resource, and the store's name for the jobs
 *                     ("job:nightly-report")
 *   --jobs M          jobs to do before exiting (1)
 *   --work-ms MS      how long one job's work takes (100)
 *   --ttl-ms MS       the lock's ttl: auto-extension renews it while the work runs (10000)
 *   --wait-ms MS      how long one acquire waits for its turn before it tries again (60000)
 *   --timeout-ms MS   each node's deadline per request, and for a connection's set-up (the
 *                     library's defaults: adaptive, and 3 s); a URL's ?timeout_ms= wins
 */
#ifndef JOB_CONFIG_H
#define JOB_CONFIG_H

#include <stdint.h>

#include <redlock.h>

typedef struct job_config {
    const char *node_urls[REDLOCK_MAX_NODES]; /* into nodes_copy */
    unsigned n_nodes;
    char *nodes_copy;
    const char *store_url;
    const char *resource;
    unsigned jobs;
    uint64_t work_ms, ttl_ms, wait_ms;
    uint64_t timeout_ms; /* 0: the library's defaults */
} job_config;

/* The client's options for cfg: the defaults, and its timeouts. */
void job_config_client_options(const job_config *cfg, redlock_options *opts);

/* Fill cfg from the command line. Returns 0, or 2 (the exit status of bad usage) after printing
 * why on stderr. Free it with job_config_free in either case. */
int job_config_parse(job_config *cfg, int argc, char **argv);
void job_config_free(job_config *cfg);

#endif /* JOB_CONFIG_H */
