# SPDX-License-Identifier: MIT
"""mutants.py - the broken libraries the suite must notice (test/mutants/run applies them).

Each mutant breaks lib/ (or the tool, tools/) in one known way: a list of (file, text,
replacement) edits, each text found exactly once in the file as it is today (so a refactor that
moves the code makes the mutant fail loudly as "not applicable" instead of silently testing
nothing), and the killers to try, fastest first. A killer is a test program of the build, with
the environment that picks the cases that should notice. The run stops at the first killer that
fails.
"""

SIM = "test/sim/test-sim"


def sim(test):
    return {"program": SIM, "env": {"SIM_TEST_FILTER": test}}


def sim_fence(test):
    return {"program": "test/sim/test-sim-fence", "env": {"SIM_TEST_FILTER": test}}


def sim_grants(test="every_path*"):
    """The waiting holds on the simulator (test_sim_grants.c): queues, grants, sets, clusters."""
    return {"program": "test/sim/test-sim-grants", "env": {"SIM_TEST_FILTER": test}}


# The simulator's models of the scripts against the real scripts (test_sim_scripts.c): any change
# of a script's replies, publications or keys on its seeded sequences.
SIM_SCRIPTS = {"program": "test/sim/test-sim-scripts", "env": {"SIM_TEST_FILTER": "models_match*"}}


def integration(program, cases="*"):
    return {"program": "test/test-" + program, "env": {"H_TEST_FILTER": cases}}


def macro(*lines):
    """Lines of a C macro as clang-format lays them out (a backslash in column 100)."""
    return "".join(line.ljust(99) + "\\\n" for line in lines)


def unit(program):
    return {"program": "test/test-" + program}


def cli(program, cases=None):
    """A cli test program (test/cli), run on the tool of the same build; cases picks its tests
    (H_TEST_FILTER, as for integration programs)."""
    env = {"H_TEST_FILTER": cases} if cases else {}
    env.update({"REDLOCK_TOOL": "tools/redlock", "REDLOCK_DOCS": "{src}/docs"})
    return {"program": "test/cli/test-" + program, "build": ["tools/redlock"], "env": env}


def pitfall(program, cases="*"):
    return {"program": "test/pitfalls/test-pitfall-" + program, "env": {"H_TEST_FILTER": cases}}


def fault(program, cases="*"):
    return {"program": "test/fault/test-fault-" + program, "env": {"H_TEST_FILTER": cases}}


def auth(program, cases="*"):
    return {"program": "test/auth/test-" + program,
            "env": {"H_TEST_FILTER": cases, "REDLOCK_DOCS": "{src}/docs"}}


# The proof of lib/core/quorum.c (test/model/run wp): a script of the tree, not a program of the build.
PROOF_WP = {"program": "{src}/test/model/run", "args": ["wp", "{src}"]}


def proof_wp(*functions):
    """The proof of lib/core/quorum.c, of these functions only: a killer takes seconds, not a minute."""
    return dict(PROOF_WP, env={"PROOFS_FUNCTIONS": ",".join(functions)})


def torture(seconds=10):
    return {"program": "test/torture/torture", "args": ["--seconds", str(seconds)]}


MUTANTS = [
    {
        "name": "quorum-of-one",
        "what": "a round is won by the first yes (quorum 1 instead of N/2+1)",
        "edits": [("lib/core/quorum.c",
                   "round->quorum = redlock__quorum_of(n_nodes);",
                   "round->quorum = 1;")],
        "killers": [sim("safety_holds"), integration("faults", "two_nodes_down*"),
                    pitfall("4-failover", "failover_before_replication*"), torture()],
    },
    {
        # Its contract says a round is won with a quorum of yes votes: the proof fails.
        "name": "majority-one-short",
        "what": "a round is won with one yes fewer than the quorum",
        "edits": [("lib/core/quorum.c",
                   "    if (round->votes_yes >= round->quorum) {",
                   "    if (round->votes_yes + 1 >= round->quorum) {")],
        "killers": [proof_wp("decide"), sim("safety_holds")],
    },
    {
        "name": "release-one-short",
        "what": "a release reports the hold continuous with one delete fewer than the quorum",
        "edits": [("lib/core/quorum.c",
                   "    if (q->votes_yes >= q->quorum)\n        return 0;",
                   "    if (q->votes_yes + 1 >= q->quorum)\n        return 0;")],
        "killers": [proof_wp("redlock__release_status")],
    },
    {
        "name": "release-decided-early",
        "what": "a release is decided while a quorum of \"not ours\" is still in reach",
        "edits": [("lib/core/quorum.c",
                   "    return q->votes_yes + out < q->quorum && q->votes_no + out <= q->n_nodes - q->quorum;",
                   "    return q->votes_yes + out < q->quorum;")],
        "killers": [proof_wp("redlock__release_decided")],
    },
    {
        "name": "inspect-one-short",
        "what": "an inspect is a picture of the nodes with one answer fewer than a quorum",
        "edits": [("lib/core/quorum.c",
                   "    return q->votes_yes + q->votes_no >= q->quorum ? 0 : REDLOCK_ENOQUORUM;",
                   "    return q->votes_yes + q->votes_no + 1 >= q->quorum ? 0 : REDLOCK_ENOQUORUM;")],
        "killers": [proof_wp("redlock__inspect_status")],
    },
    {
        "name": "won-too-late-after-the-deadline",
        "what": "an extend decided at its lock's deadline is taken as won in time",
        "edits": [("lib/core/quorum.c",
                   "    return q->decided_us >= prev_deadline_us;",
                   "    return q->decided_us > prev_deadline_us;")],
        "killers": [proof_wp("redlock__won_too_late")],
    },
    {
        "name": "left-nothing-despite-a-timeout",
        "what": "a lost round with a timed-out node is taken to have left no key",
        "edits": [("lib/core/quorum.c",
                   "    return q->votes_yes == 0 && q->votes_timeout == 0;",
                   "    return q->votes_yes == 0;")],
        "killers": [proof_wp("redlock__round_left_nothing")],
    },
    {
        "name": "quorum-wait-one-short",
        "what": "a waiter sleeps until one node fewer than a quorum could let it in",
        "edits": [("lib/core/quorum.c",
                   "        if (n >= q->quorum)\n            best = v;",
                   "        if (n + 1 >= q->quorum)\n            best = v;")],
        "killers": [proof_wp("node_wait_ms", "redlock__quorum_wait_ms"), unit("decisions")],
    },
    {
        "name": "quorum-gone-one-early",
        "what": "a checked lock is reported lost while a quorum may still hold it",
        "edits": [("lib/core/quorum.c",
                   "    return free_nodes > n_nodes - redlock__quorum_of(n_nodes);",
                   "    return free_nodes >= n_nodes - redlock__quorum_of(n_nodes);")],
        "killers": [proof_wp("redlock__quorum_gone"), unit("decisions")],
    },
    {
        "name": "deadline-of-the-whole-ttl",
        "what": "a won round's deadline is its decision plus the ttl, not the validity left",
        "edits": [("lib/core/quorum.c",
                   "    return q->decided_us + q->validity_us;",
                   "    return q->decided_us + q->ttl_us;")],
        "killers": [proof_wp("redlock__round_deadline_us"), unit("decisions")],
    },
    {
        "name": "kept-quorum-one-short",
        "what": "a mask of nodes (those that kept a token, or granted a lock) is a quorum with one fewer",
        "edits": [("lib/core/quorum.c",
                   "    return redlock__count_nodes(mask, n_nodes) >= redlock__quorum_of(n_nodes);",
                   "    return redlock__count_nodes(mask, n_nodes) + 1 >= redlock__quorum_of(n_nodes);")],
        "killers": [proof_wp("redlock__mask_quorum"),
                    integration("amnesia", "retake_does_not_hide_a_majority_back_empty")],
    },
    {
        # Safe, only slow to give up: no test but the proof (a round lost as soon as the quorum
        # is out of reach) notices.
        "name": "lost-one-vote-late",
        "what": "a round is lost one failure after the quorum went out of reach",
        "edits": [("lib/core/quorum.c",
                   "    } else if (failures > round->n_nodes - round->quorum) {",
                   "    } else if (failures > round->n_nodes - round->quorum + 1) {")],
        "killers": [proof_wp("decide")],
    },
    {
        # A majority for an odd N, half of the nodes for an even one: two holders of 2 or 4
        # nodes can each win. The simulation used to run only 3 and 5 nodes; it runs 2 and 4 too.
        "name": "quorum-half-for-even-n",
        "what": "the quorum is (N+1)/2: a strict majority for odd N, only half for even N",
        "edits": [("lib/core/quorum.c",
                   "round->quorum = redlock__quorum_of(n_nodes);",
                   "round->quorum = (n_nodes + 1) / 2;")],
        "killers": [sim("safety_holds"), unit("quorum")],
    },
    {
        # Killed by the simulation's edge-of-allowance seeds (opposite clocks, contenders timed
        # to the keys' expiry); before those the sim let it survive, and only the validity
        # formula check of the integration suite caught it.
        "name": "no-drift",
        "what": "the clock-drift allowance is not subtracted from the validity",
        "edits": [("lib/core/quorum.c",
                   "return left_us > round->drift_us ? left_us - round->drift_us : 0;",
                   "return left_us;")],
        "killers": [sim("safety_holds"), integration("lock", "lock_is_free_again_after_ttl"),
                    integration("extend"), torture()],
    },
    {
        "name": "validity-from-decision",
        "what": "validity measured from the deciding vote instead of the round's start",
        "edits": [("lib/core/quorum.c",
                   "uint64_t elapsed_us = now_us > round->start_us ? now_us - round->start_us : 0;",
                   "uint64_t elapsed_us = 0;")],
        "killers": [sim("safety_holds"), integration("lock", "lock_is_free_again_after_ttl"),
                    torture()],
    },
    {
        "name": "release-without-compare",
        "what": "release deletes the key whatever token it holds",
        "edits": [("lib/core/lua/release.lua",
                   'if redis.call("get", KEYS[1]) == ARGV[1] then',
                   'if true then')],
        "killers": [SIM_SCRIPTS,
                    integration("lock", "release_with_wrong_token*"), integration("scripts"),
                    pitfall("3-fixed-del"), torture()],
    },
    {
        "name": "acquire-without-ttl",
        "what": "the acquire's SET has no PX: a holder that dies leaves a key that never expires",
        "edits": [("lib/core/command.c",
                   '        ARG("NX", 2);\n        ARG("PX", 2);\n'
                   '        ARG(ttl, u64_decimal(ttl, cmd->ttl_ms));\n',
                   '        ARG("NX", 2);\n')],
        "killers": [pitfall("1-setnx-expire"), integration("lock", "lock_is_free_again_after_ttl")],
    },
    {
        "name": "no-release-everywhere",
        "what": "a lost acquire round leaves its keys where it got them",
        "edits": [("lib/lock/acquire.c",
                   "    redlock__round_release_everywhere(c, lock, leave, false);\n    if (lock->caller_token",
                   "    if (lock->caller_token")],
        "killers": [integration("faults", "lost_round_leaves_no_key"),
                    integration("faults", "three_nodes_down_fails_fast*"), sim("safety_holds")],
    },
    {
        "name": "extend-without-compare",
        "what": "extend renews the key whatever token it holds",
        "edits": [("lib/core/lua/extend.lua", "if v == ARGV[1] then", "if v ~= false then")],
        "killers": [SIM_SCRIPTS, integration("extend", "extend_fails_when_quorum_lost_the_key"),
                    integration("scripts"), integration("autoextend")],
    },
    {
        "name": "token-16-bits",
        "what": "tokens carry 16 bits of randomness instead of 128",
        "edits": [("lib/lock/acquire.c",
                   "    int rc = c->io->ops->random(c->io, raw, sizeof(raw));\n",
                   "    int rc = c->io->ops->random(c->io, raw, sizeof(raw));\n"
                   "    memset(raw + 2, 0, sizeof(raw) - 2);\n")],
        "killers": [integration("tokens"), integration("lock", "tokens_are_random")],
    },
    {
        "name": "auto-never-reports-loss",
        "what": "auto-extension never calls the lost callback",
        "edits": [("lib/lock/autoextend.c",
                   "    a->lost_cb(lock, reason, a->lost_data);\n",
                   "    (void)reason;\n")],
        "killers": [sim("auto_extension_safe"), integration("autoextend"),
                    pitfall("5-no-renewal", "auto_extension_reports_a_loss*")],
    },
    {
        "name": "simple-reply-wrong-integer",
        "what": "the fast path reads :0 as :1: a release that deleted nothing counts as a yes",
        "edits": [("lib/core/command.c",
                   "        out->integer = negative ? -v : v;\n",
                   "        out->integer = negative ? -v : v + 1;\n")],
        "killers": [unit("command"), integration("lock")],
    },
    {
        "name": "release-without-deadline",
        "what": "release requests have no deadline: a silent node holds the release forever",
        "edits": [("lib/net/node.c",
                   "    req->deadline_us = deadline_at(n, now);\n"
                   "    fifo_push(n, req);\n",
                   "    req->deadline_us = req->cmd->kind == REDLOCK__CMD_RELEASE\n"
                   "                           ? UINT64_MAX : deadline_at(n, now);\n"
                   "    fifo_push(n, req);\n")],
        "killers": [integration("faults", "paused_node_does_not_delay_or_confuse"),
                    integration("node"), integration("faults")],
    },
    {
        "name": "late-reply-matched",
        "what": "after a timeout, the late reply is matched to the next request",
        "edits": [("lib/net/node.c",
                   "        n->skip_replies += req->asking ? 2 : 1; /* its replies, if they ever come, "
                   "are dropped */\n",
                   "")],
        "killers": [integration("faults", "paused_node_does_not_delay_or_confuse"), integration("node"),
                    integration("faults"), torture()],
    },
    {
        "name": "tool-wait-is-one-round",
        "what": "redlock --wait tries once instead of waiting in the library's queue",
        "edits": [("tools/redlock.c",
                   "    opts.wait_ms = t->args.wait_ms; /* 0: one round */",
                   "    opts.wait_ms = 0;")],
        "killers": [cli("cli-wait", "waiters_take_turns*")],
    },
    {
        "name": "tool-forwards-three-signals",
        "what": "redlock run forwards only SIGHUP, SIGINT and SIGTERM: SIGUSR1 kills the tool and "
                "leaves COMMAND running without the lock",
        "edits": [("tools/tool.h", "#define TOOL_N_SIGNALS 9", "#define TOOL_N_SIGNALS 3"),
                  ("tools/redlock.c",
                   "{SIGHUP,  SIGINT,  SIGQUIT,  SIGTERM, SIGUSR1,\n"
                   "                                                SIGUSR2, SIGALRM, SIGWINCH, SIGCONT}",
                   "{SIGHUP, SIGINT, SIGTERM}")],
        "killers": [cli("cli-signals")],
    },
    {
        "name": "tool-exits-on-signal",
        "what": "an interrupted redlock exits 128+N instead of dying of the signal: a shell loop "
                "around it goes on after Ctrl-C",
        "edits": [("tools/redlock.c", "        die_of(t.die_signal);", "        (void)die_of;")],
        "killers": [cli("cli-signals", "interrupted_wait_dies_of_the_signal"), cli("cli-signals")],
    },
    {
        "name": "tool-command-sees-nodes",
        "what": "redlock run passes $REDLOCK_NODES (node passwords) on to COMMAND",
        "edits": [("tools/run.c",
                   "            strncmp(*e, \"REDLOCK_NODES=\", 14) == 0 ||\n", "")],
        "killers": [cli("cli-signals")],
    },
    {
        "name": "check-accepts-replica",
        "what": "redlock check passes a read-only replica as a node fit to hold locks",
        "edits": [("tools/check_server.c",
                   "        check_note(&sc->errors, \"is a read-only replica (%s answered READONLY): "
                   "locks need masters\",\n                   argv[0]);",
                   "        (void)0;"),
                  ("tools/check_server.c",
                   "        if (!said)\n            check_note(&sc->errors, \"is a replica (role %s): "
                   "locks need masters\", sc->role);",
                   "        (void)said;")],
        "killers": [cli("cli-check", "replica_is_an_error"), cli("cli-check")],
    },
    {
        "name": "check-cluster-probe-anywhere",
        "what": "redlock check probes a cluster's masters on keys of any slot (answered MOVED)",
        "edits": [("tools/check_cluster.c",
                   "        int m = redlock__cluster_map_master(map, slot);\n        if (m < 0 || "
                   "index[m] < 0 ||",
                   "        int m = (int)(i % map->masters_len);\n        if (m < 0 || "
                   "index[m] < 0 ||")],
        "killers": [cli("cli-check", "cluster_masters_checked"), cli("cli-check")],
    },
    {
        "name": "check-cluster-ignores-wait-replicas",
        "what": "redlock check passes a cluster whose masters have fewer replicas than "
                "wait_replicas, so that no write there could count",
        "edits": [("tools/check_server.c", "    if (want > 0 && have >= 0 && have < want)",
                   "    if (want > 0 && have >= 0 && have < 0)")],
        "killers": [cli("cli-check", "cluster_*"), cli("cli-check")],
    },
    {
        "name": "check-ignores-eviction",
        "what": "redlock check does not warn of a maxmemory-policy that may evict a held lock",
        "edits": [("tools/check_server.c",
                   "    return strncmp(policy, \"allkeys-\", 8) == 0 || strncmp(policy, \"volatile-\", 9) "
                   "== 0;",
                   "    return policy == NULL;")],
        "killers": [cli("cli-check", "evicting_policy_warns"), cli("cli-check")],
    },
    {
        "name": "fence-without-commit",
        "what": "a fenced lock is granted on the acquire round alone: the fence is never committed",
        "edits": [("lib/lock/acquire.c",
                   "status = r->cmd.kind == REDLOCK__CMD_ACQUIRE_FENCED ? redlock__commit_start(o, r, false)",
                   "status = true ? redlock__lock_grant(o, r)")],
        "killers": [integration("fencing", "fences_grow_from_one"), integration("fencing_order"),
                    sim_fence("fences_increase*"), torture()],
    },
    {
        "name": "fence-not-above-counters",
        "what": "the fence is the largest counter read, not one more",
        "edits": [("lib/core/quorum.c",
                   "if (round->decision == REDLOCK_ROUND_PENDING && counter + 1 > round->fence)\n"
                   "            round->fence = counter + 1;",
                   "if (round->decision == REDLOCK_ROUND_PENDING && counter > round->fence)\n"
                   "            round->fence = counter;")],
        "killers": [{"program": "test/test-fence"}, integration("fencing_order"),
                    sim_fence("fences_increase*")],
    },
    {
        "name": "pre-ack-any-yes",
        "what": "every yes of a fenced acquire counts as a commit ack, also where the node's "
                "counter is below the fence",
        "edits": [("lib/lock/won.c",
                   "a->fence + 1 == fence",
                   "a->fence + 1 <= fence")],
        "killers": [integration("fencing", "commit_only_where_the_fence_is_missing"),
                    sim_fence("fences_increase*")],
    },
    {
        "name": "acquire-counter-not-raised",
        "what": "the fenced acquire's script reads the counter but does not raise it, so a yes "
                "counted as a commit ack has not written the fence",
        "edits": [("lib/core/lua/fence.lua",
                   'redis.call("set", ck, up .. string.rep',
                   'redis.call("exists", ck, up .. string.rep')],
        "killers": [SIM_SCRIPTS, integration("fencing", "acquire_raises_the_counter_by_one"),
                    integration("fencing_order")],
    },
    {
        "name": "commit-without-compare",
        "what": "the commit raises the counter whatever token the key holds",
        "edits": [("lib/core/lua/commit.lua",
                   'if redis.call("get", KEYS[1]) ~= ARGV[1] then',
                   'if false then')],
        "killers": [SIM_SCRIPTS, integration("fencing", "commit_lost_releases_everywhere")],
    },
    {
        "name": "commit-acks-ignored",
        "what": "the commit round is won by the quorum whatever fence_commit asks for",
        "edits": [("lib/lock/won.c",
                   "redlock_round_commit_init(&r->q, &acquire->q, o->lock->fencing.commit);",
                   "redlock_round_commit_init(&r->q, &acquire->q, 0);")],
        "killers": [sim_fence("amnesia_with_one_more_ack*"),
                    integration("fencing", "fence_commit_counts_acks"),
                    integration("fencing", "commit_lost_releases_everywhere")],
    },
    {
        "name": "commit-validity-from-decision",
        "what": "a fenced lock's validity is counted from the acquire round's decision, not its "
                "start",
        "edits": [("lib/core/quorum.c",
                   "next.start_us = acquire->start_us;",
                   "next.start_us = acquire->decided_us;")],
        "killers": [{"program": "test/test-fence"}],
    },
    {
        "name": "retake-without-counter",
        "what": "a retake of a fenced lock does not restore the node's counter",
        "edits": [("lib/core/command.c",
                   "return cmd->fence != 0 && cmd->retake ? &redlock__script_extend_fenced",
                   "return false ? &redlock__script_extend_fenced")],
        "killers": [integration("fencing", "extend_keeps_fence*")],
    },
    {
        "name": "cancel-keeps-attempt",
        "what": "a canceled acquire with a round in flight leaves its attempt's keys on the nodes",
        "edits": [("lib/lock/acquire.c",
                   "    case OP_RUNNING:\n        redlock__round_release_everywhere(c, lock, true, false);\n",
                   "    case OP_RUNNING:\n")],
        "killers": [integration("cancel", "cancel_acquire_in_flight")],
    },
    {
        "name": "cancel-auto-extension",
        "what": "redlock_cancel also cancels the auto-extension's own extends",
        "edits": [("lib/lock/autoextend.c",
                   "on_extended, NULL, false);",
                   "on_extended, NULL, true);")],
        "killers": [integration("cancel", "cancel_refusals")],
    },
    {
        "name": "close-strands-locks",
        "what": "closing the client releases nothing it holds",
        "edits": [("lib/lock/op.c",
                   "    if ((flags & REDLOCK_CLOSE_FAST) == 0)\n        release_all(c);\n",
                   "    (void)release_all;\n")],
        "killers": [integration("cancel", "close_releases_held_locks")],
    },
    {
        "name": "close-order-swapped",
        "what": "a close tells the holds of redlock_using they ended before the auto-extended locks "
                "hear they are lost (docs/api.md promises the other order)",
        "edits": [("lib/lock/client.c",
                   "{&c->ops, &c->closing_lost, &c->closing_ended, &c->locks}",
                   "{&c->ops, &c->closing_ended, &c->closing_lost, &c->locks}")],
        "killers": [integration("close", "close_tells_in_the_documented_order")],
    },
    {
        "name": "release-not-kept",
        "what": "a release that finds its node down is not kept for the reconnection",
        "edits": [("lib/net/node.c",
                   "    if (vote == REDLOCK_VOTE_ERROR)\n        maybe_keep(n, req, now);\n",
                   "")],
        "killers": [integration("cancel", "release_kept_until_node_returns")],
    },
    {
        "name": "timed-out-release-forgotten",
        "what": "a release that timed out is not kept for its late answer: when the connection "
                "then drops, nobody sends it again and the key stays for its ttl",
        "edits": [("lib/net/node.c",
                   "        return;\n    int rc = redlock__relq_keep(&n->owed,",
                   "        return;\n    if (req != NULL)\n        return;\n"
                   "    int rc = redlock__relq_keep(&n->owed,")],
        "killers": [fault("kept", "timed_out_release_sent_after_a_reset")],
    },
    {
        "name": "replica-taken-for-a-node",
        "what": "the handshake's role is not checked: a writable replica votes beside its master",
        "edits": [("lib/net/node.c",
                   "    if (n->handshake.replica_of[0] != '\\0' && n->cfg.replies == "
                   "REDLOCK__READER_NODE) {",
                   "    if (false) {")],
        "killers": [fault("real-peers", "writable_replica_is_refused")],
    },
    {
        "name": "release-waits-for-the-handshake",
        "what": "releases made before the first connection wait for the handshake's answers: a "
                "one-shot release to a stopped server is never written",
        "edits": [("lib/net/node.c",
                   "    if (n->state == NODE_STARTING && n->held.len > 0 && n->held_others == 0) {",
                   "    if (false) {")],
        "killers": [cli("cli", "release_reaches_a_stopped_node")],
    },
    {
        "name": "run-release-left-to-a-closing-client",
        "what": "run's release that found a node down is not sent again by a fresh client: the "
                "closing client drops what it kept, and a stopped node keeps the key",
        "edits": [("tools/run.c", "            t->cleanup_needed = true;",
                   "            t->cleanup_needed = false;")],
        "killers": [cli("cli-run", "run_release_reaches_a_stopped_node")],
    },
    {
        # A node that missed a waiter's last release keeps the waiter at its queue's head.
        "name": "kept-release-forgets-the-waiter",
        "what": "a waiter's last release kept for a node that was down is sent without the "
                "waiter's id: the node keeps it in the queue, in everybody's way",
        "edits": [("lib/net/relq.c",
                   "    size_t waiter_len = cmd->place != NULL && cmd->leave ? cmd->place->waiter_len : 0;\n",
                   "    size_t waiter_len = 0;\n")],
        "killers": [integration("cancel", "waiter_release_kept_leaves_the_queue")],
    },
    {
        "name": "kept-leave-dropped-with-the-key",
        "what": "a waiter's last release kept for a node that was down is dropped when the key's "
                "ttl runs out, though the waiter's place in the node's queue lives longer",
        "edits": [("lib/net/node.c",
                   "    if (cmd->place != NULL && cmd->leave && cmd->place->place_ttl_ms > lives_ms)\n",
                   "    if (false)\n")],
        "killers": [integration("cancel", "waiter_release_kept_past_the_keys_ttl")],
    },
    {
        "name": "release-without-publish",
        "what": "a release does not tell the node's subscribers: waiters sleep their retry delay",
        "edits": [("lib/core/lua/release.lua",
                   '    redis.pcall("publish", KEYS[1], ARGV[1])\n',
                   '')],
        "killers": [SIM_SCRIPTS, integration("notify", "waiter_wakes_on_release")],
    },
    {
        "name": "newest-waiter-first",
        "what": "a release wakes the waiter that started last instead of the longest-waiting one",
        "edits": [("lib/lock/waiter.c",
                   "    for (redlock__list *it = c->ops.next; it != &c->ops; it = it->next) {\n"
                   "        redlock__op *o = REDLOCK__CONTAINER_OF(it, redlock__op, closer.link);\n"
                   "        if (o->w == NULL || !o->w->watching || o->state == OP_DECIDED ||\n"
                   "            !redlock__lock_has_key(o->lock, channel, len))",
                   "    for (redlock__list *it = c->ops.prev; it != &c->ops; it = it->prev) {\n"
                   "        redlock__op *o = REDLOCK__CONTAINER_OF(it, redlock__op, closer.link);\n"
                   "        if (o->w == NULL || !o->w->watching || o->state == OP_DECIDED ||\n"
                   "            !redlock__lock_has_key(o->lock, channel, len))")],
        "killers": [integration("notify", "longest_waiting_first")],
    },
    {
        "name": "lapsed-release-reports-ok",
        "what": "a release reports success whenever a quorum answered, as before issue 17: a hold "
                "that lapsed (released after its validity, or its keys gone) looks continuous",
        "edits": [("lib/core/quorum.c",
                   "    if (lapsed)\n"
                   "        return REDLOCK_ELOST;\n"
                   "    if (q->votes_yes >= q->quorum)\n"
                   "        return 0;\n"
                   "    if (q->votes_no > q->n_nodes - q->quorum)\n"
                   "        return REDLOCK_ELOST;\n"
                   "    return REDLOCK_ENOQUORUM;\n",
                   "    (void)lapsed;\n"
                   "    return q->votes_yes + q->votes_no >= q->quorum ? 0 : REDLOCK_ENOQUORUM;\n")],
        "killers": [integration("lapsed", "release_after_ttl_is_lost"), cli("cli-lapsed")],
    },
    {
        "name": "attached-retake-allowed",
        "what": "an attached handle may extend with REDLOCK_EXTEND_RETAKE: it re-creates keys "
                "another holder took and released meanwhile, as if its hold had no gap",
        "edits": [("lib/lock/hold.c",
                   "    if (lock->attached)\n        return redlock__client_error(",
                   "    if (false)\n        return redlock__client_error(")],
        "killers": [integration("lapsed", "attached_retake_after_another_holder_is_refused")],
    },
    {
        "name": "multi-acquire-over-a-held-key",
        "what": "a set's acquire script does not check that every key is free: a node grants the "
                "set over another holder's key",
        "edits": [("lib/core/lua/acquire_multi.lua",
                   'if redis.call("exists", KEYS[i]) == 1 then',
                   'if false then')],
        "killers": [SIM_SCRIPTS, integration("multi", "all_or_none_per_node")],
    },
    {
        "name": "multi-release-yes-for-part",
        "what": "a set's release votes yes where it deleted any key of the set, not all of them: "
                "a node that no longer held the whole set counts as a holder",
        "edits": [("lib/core/lua/release_multi.lua", "if n == #KEYS then", "if n > 0 then")],
        "killers": [SIM_SCRIPTS, integration("multi", "release_deletes_what_is_ours")],
    },
    {
        "name": "multi-extend-without-compare",
        "what": "a set's extend renews (and re-creates) every key whatever it holds: a node that "
                "lost part of the set, or gave it to another holder, votes yes",
        "edits": [("lib/core/lua/extend_multi.lua",
                   '    elseif v ~= ARGV[1] then',
                   '    elseif false then')],
        "killers": [SIM_SCRIPTS, integration("multi", "extend_covers_the_set")],
    },
    {
        "name": "multi-first-key-only",
        "what": "a lock on several resources takes only the first one",
        "edits": [("lib/lock/lock.c",
                   "    lock->n_more = count - 1;",
                   "    lock->n_more = 0;")],
        "killers": [integration("multi", "set_taken_and_released_everywhere")],
    },
    {
        "name": "multi-duplicates-allowed",
        "what": "a set naming one resource twice is accepted",
        "edits": [("lib/lock/client.c",
                   "            if (hash[i] == hash[j] && len == redlock__len(resources[j], lens[j]) &&",
                   "            if (false && hash[i] == hash[j] &&")],
        "killers": [integration("multi", "bad_sets_are_refused")],
    },
    {
        "name": "multi-kept-release-first-key-only",
        "what": "a set's release kept for a node that was down is sent for its first key only",
        "edits": [("lib/net/relq.c",
                   "        e->cmd.n_more = cmd->n_more;",
                   "        e->cmd.n_more = 0;")],
        "killers": [integration("multi", "release_of_a_set_kept_until_node_returns")],
    },
    {
        "name": "queue-head-ignored",
        "what": "a waiter's acquire script takes a free key for any waiter, not the queue's head: "
                "turns no longer follow the order the waiters began to wait in",
        "edits": [("lib/core/lua/acquire_queued.lua",
                   "        if v or (h and h ~= me) then",
                   "        if v then")],
        "killers": [SIM_SCRIPTS, integration("scripts", "queued_scripts_grant_the_head_only")],
    },
    {
        "name": "queue-order-by-arrival",
        "what": "a waiter's place in the queue is when its attempt reached the node, not when it "
                "began to wait: the nodes order the same waiters differently, and a waiter that "
                "asked again later never moves up",
        "edits": [("lib/core/lua/acquire_queued.lua",
                   'redis.call("zadd", q, "nx", ARGV[4], me)',
                   'redis.call("zadd", q, "nx", now, me)')],
        "killers": [SIM_SCRIPTS, integration("scripts", "queued_scripts_grant_the_head_only")],
    },
    {
        "name": "queue-kept-by-a-waiter-that-gave-up",
        "what": "a waiter whose wait ran out keeps its place in the queue: every release names it, "
                "and the waiters behind it sleep out their retry delay",
        "edits": [("lib/lock/acquire.c",
                   "        int rc = attempt_release(o, now, !retry, status != REDLOCK_ENOMEM);",
                   "        int rc = attempt_release(o, now, false, status != REDLOCK_ENOMEM);")],
        "killers": [integration("notify", "waiter_that_gives_up_leaves_the_queue")],
    },
    {
        "name": "queue-kept-by-the-releasing-holder",
        "what": "a holder's release does not take it out of the queue: it stays the head, and the "
                "next waiter is never named",
        "edits": [("lib/lock/hold.c",
                   "    r->cmd.leave = true;",
                   "    (void)0;")],
        "killers": [sim_grants(), integration("notify", "turns_across_clients_follow_the_queue")],
    },
    {
        "name": "notification-wakes-besides-the-head",
        "what": "a release that has a next head wakes a waiter of every client, as before the "
                "queue (it tells the queue's channel, and clients ignore the head it names): all "
                "of them retry, and all but one lose",
        "edits": [("lib/core/lua/release_queued.lua",
                   'if type(told) ~= "number" or told == 0 then',
                   "if true then"),
                  ("lib/lock/waiter.c",
                   "            if (head != NULL) /* else another client's waiter is next */\n"
                   "                op_wake(c, head, 0, true);\n",
                   "            op_wake(c, o, 0, true);\n")],
        "killers": [SIM_SCRIPTS, integration("scripts", "queued_scripts_grant_the_head_only"),
                    integration("notify", "turns_across_clients_follow_the_queue")],
    },
    {
        "name": "grant-to-a-head-nobody-hears",
        "what": "a release grants the key to the queue's head even when nobody listens on its "
                "channel: a waiter whose client vanished holds the key",
        "edits": [("lib/core/lua/queue.lua",
                   'type(subs[2]) == "number" and subs[2] > 0',
                   'type(subs[2]) == "number" and subs[2] >= 0')],
        "killers": [SIM_SCRIPTS, integration("scripts", "queued_release_grants_a_listening_head")],
    },
    {
        "name": "grant-record-outlives-its-release",
        "what": "the release of a waiter's lost attempt keeps its grant record: a later release "
                "sets the key to a token the waiter has given up",
        "edits": [("lib/core/lua/release_queued.lua",
                   '    redis.call("hdel", d, me .. ":g")\n',
                   "")],
        "killers": [SIM_SCRIPTS, integration("scripts", "queued_release_grants_a_listening_head")],
    },
    {
        "name": "grant-counts-for-every-node",
        "what": "one node's grant is counted as every node's: grants from a minority make a lock",
        "edits": [("lib/lock/waiter.c",
                   "    return redlock__mask_quorum(o->w->granted, o->client->n_nodes) && grant_win(o);",
                   "    return o->w->granted != 0 && grant_win(o);"),
                  ("lib/lock/waiter.c",
                   "            if ((w->granted & (UINT64_C(1) << i)) == 0)\n"
                   "                continue;\n"
                   "            r->results[i].vote = REDLOCK_VOTE_YES;",
                   "            r->results[i].vote = REDLOCK_VOTE_YES;")],
        "killers": [sim_grants(), integration("notify", "grants_from_a_minority_are_no_lock")],
    },
    {
        # Issue 39's first finding: a grant counted for the node its tag names, whichever
        # subscriber delivered it - grants forged on one server for every tag made a second holder.
        "name": "grant-counted-by-its-tag",
        "what": "a grant counts for the node its message names, whichever server sent it: grants "
                "forged on one server for every tag make a lock",
        "edits": [("lib/lock/waiter.c",
                   "stamp > w->grant_until_us || tag != from ||\n        from >= c->n_nodes ||",
                   "stamp > w->grant_until_us || tag >= c->n_nodes ||")],
        "killers": [fault("forged", "forged_grants_cost_one_vote")],
    },
    {
        # One PUBLISH heard on two subscribers of one server (listed twice): the subscriber that
        # reached another node's server must not vouch for its own node.
        "name": "grant-unvouched-subscriber",
        "what": "a message counts for the subscriber's node whatever server the subscriber "
                "reached: a server listed twice hears one grant as two nodes' when forged",
        "edits": [("lib/net/io_uv.c",
                   "    unsigned from = sub_is_node(io, node, run_id) ? node : REDLOCK__IO_NO_NODE;",
                   "    unsigned from = run_id != NULL ? node : REDLOCK__IO_NO_NODE;")],
        "killers": [fault("forged", "server_listed_twice_forged")],
    },
    {
        "name": "fenced-grant-without-commit",
        "what": "a fenced lock won by grants pre-counts every grant whose counter is one below "
                "the fence as a commit ack: a forged counter becomes the fence, no commit runs",
        "edits": [("lib/lock/waiter.c",
                   "status = redlock__commit_start(o, r, true);",
                   "status = redlock__commit_start(o, r, false);")],
        "killers": [fault("forged", "granted_fence_is_committed")],
    },
    {
        "name": "wake-ups-unbudgeted",
        "what": "every wake-up moves a waiter's attempt up: wake-ups forged on one server make "
                "a round on every node each",
        "edits": [("lib/lock/waiter.c",
                   "    if (budgeted)\n        due = redlock__waiter_wake_due(c, w, due);\n",
                   ""),
                  ("lib/lock/acquire.c",
                   "        due = redlock__waiter_wake_due(c, w, due);\n",
                   "")],
        "killers": [fault("forged", "forged_wakeups_cost_bounded_rounds")],
    },
    {
        "name": "upkeep-fails-the-release",
        "what": "the queue's upkeep runs unprotected in the release script: another tenant's "
                "write into a queue key fails the release of the lock it deleted",
        "edits": [("lib/core/lua/release_queued.lua",
                   "        upkeep(leave, KEYS[i])\n",
                   "        leave(KEYS[i])\n")],
        "killers": [fault("forged", "foreign_queue_types_do_not_fail_the_release")],
    },
    {
        "name": "queue-scan-unbounded",
        "what": "a queue script reads and drops every stale member in one call: garbage in the "
                "queue costs unbounded work (and BUSY for every client of the server)",
        "edits": [("lib/core/lua/queue.lua",
                   'local ids = redis.call("zrange", q, 0, QUEUE_SCAN - 1)',
                   'local ids = redis.call("zrange", q, 0, -1)')],
        "killers": [fault("forged", "queue_garbage_costs_bounded_work")],
    },
    {
        # Issue 39's third finding: a retake re-created the keys of two of three nodes that came
        # back empty, and the hold read as continuous.
        "name": "retake-proves-continuity",
        "what": "a node back as a new server leaves the lock's kept nodes, but fewer than a "
                "quorum left is no gap: the retake re-creates the keys and nothing is reported",
        "edits": [("lib/lock/kept.c",
                   "    lock->gap = true;\n    lock->lapsed = true; /* no retake from now on: it would hide the gap */\n",
                   "")],
        "killers": [integration("amnesia", "retake_does_not_hide_a_majority_back_empty")],
    },
    {
        "name": "continuity-from-the-last-round-alone",
        "what": "a key an extend's retake set anew (its script answers 2) counts as renewed: a "
                "node seen back empty after a retake restored another hides the gap before it",
        "edits": [("lib/lock/round.c",
                   "        if (vote == REDLOCK_VOTE_YES && !anew) {",
                   "        if (vote == REDLOCK_VOTE_YES) {")],
        "killers": [integration("amnesia", "retake_does_not_hide_a_gap_seen_late"),
                    fault("continuity")],
    },
    {
        # Issue 39, the model's trails: the release reported the hold continuous from any
        # quorum of deletes, keys set anew included.
        "name": "release-continuous-without-kept-nodes",
        "what": "a release is continuous once a quorum deleted the key, whether or not those "
                "nodes kept it (a key a retake set anew vouches for the whole hold)",
        "edits": [("lib/lock/hold.c",
                   "    redlock__cont cont = shown ? REDLOCK__CONT_PROVEN : redlock__round_continuity(r);",
                   "    redlock__cont cont = REDLOCK__CONT_PROVEN;")],
        "killers": [fault("continuity", "fresh_keys_prove_nothing"), fault("continuity")],
    },
    {
        "name": "extend-continuous-at-any-quorum",
        "what": "an extend won at a quorum of yes is continuous, whether or not a quorum of kept "
                "nodes renewed their keys in it",
        "edits": [("lib/lock/hold.c",
                   "        if (cont == REDLOCK__CONT_PENDING)\n            return false;\n"
                   "        r->proven = cont == REDLOCK__CONT_PROVEN;",
                   "        (void)cont;\n        r->proven = true;")],
        "killers": [fault("continuity", "fresh_keys_prove_nothing"), fault("continuity")],
    },
    {
        "name": "late-yes-kept-at-once",
        "what": "a yes that comes after the acquire's decision is kept at once: its key may have "
                "been set after a first voter lost its own, and that gap is hidden",
        "edits": [("lib/lock/round.c",
                   "        redlock__kept_fresh(lock, i, now); /* set after the decision, perhaps */",
                   "        lock->cont.kept |= UINT64_C(1) << i;")],
        "killers": [integration("amnesia", "restart_right_after_a_late_yes_is_a_loss_when_unheard")],
    },
    {
        "name": "probe-never-sent",
        "what": "a quiet client never asks its nodes after a late yes: the fresh key stays "
                "unconfirmed, and a node back empty then costs the lock",
        "edits": [("lib/lock/kept.c",
                   "    c->probe_armed = true;\n    redlock__client_timer_start(",
                   "    return;\n    redlock__client_timer_start(")],
        "killers": [integration("amnesia", "a_quiet_client_asks_after_a_late_yes")],
    },
    {
        "name": "probe-answer-ignored",
        "what": "the answer to the client's probe is not counted as the node heard",
        "edits": [("lib/lock/kept.c",
                   "    if (vote == REDLOCK_VOTE_YES && req->sent_us > c->heard_us[p->node])",
                   "    if (vote == REDLOCK_VOTE_YES && req->sent_us > UINT64_MAX - 1)")],
        "killers": [integration("amnesia", "a_quiet_client_asks_after_a_late_yes")],
    },
    {
        "name": "continuity-one-short",
        "what": "a round's continuity is shown with one kept node fewer than the quorum",
        "edits": [("lib/core/quorum.c",
                   "    if (redlock__count_nodes(kept & evidence, n_nodes) >= quorum)",
                   "    if (redlock__count_nodes(kept & evidence, n_nodes) + 1 >= quorum)")],
        "killers": [proof_wp("redlock__continuity"), fault("continuity")],
    },
    {
        "name": "release-ok-unproven",
        "what": "a release whose continuity is not shown still reports 0 when a quorum deleted",
        "edits": [("lib/core/quorum.c",
                   "    if (!lapsed && cont != REDLOCK__CONT_PROVEN && *status == 0)",
                   "    if (!lapsed && cont == REDLOCK__CONT_PENDING && *status == 0)")],
        "killers": [proof_wp("redlock__release_decided_cont"), fault("continuity")],
    },
    {
        "name": "grant-without-replica-wait",
        "what": "a cluster node with wait_replicas takes grant records: a grant counts with no "
                "replica having the key, and a failover loses it under a valid lock",
        "edits": [("lib/net/cluster.c",
                   ".grant_tag = cl->replica_wait > 0 ? 0 : cr->outer->grant_tag};",
                   ".grant_tag = cr->outer->grant_tag};")],
        "killers": [integration("cluster", "grant_waits_for_replicas")],
    },
    {
        "name": "grant-for-the-full-ttl-to-a-half-open-waiter",
        "what": "a grant sets the key for the head's whole ttl whatever is left of its place: a "
                "waiter cut off behind half-open connections holds the next waiters off for it",
        "edits": [("lib/core/lua/release_queued.lua",
                   "    local full = r.ttl <= left",
                   "    local full = true")],
        "killers": [SIM_SCRIPTS, integration("scripts", "grant_lasts_no_longer_than_the_place"),
                    fault("grants", "half_open_waiter_delays_no_longer_than_its_place")],
    },
    {
        "name": "cut-grant-taken-for-a-lock",
        "what": "a grant cut at the head's place deadline counts as a yes with the head's ttl: "
                "the lock is reported valid for longer than its keys live",
        "edits": [("lib/lock/waiter.c",
                   "    if (!(full == 1 && ",
                   "    if (!(full <= 1 && ")],
        "killers": [sim_grants(), integration("notify", "grant_cut_at_the_place_is_claimed")],
    },
    {
        # The fourth finding of the grants issue.
        "name": "pubsub-refusal-fails-the-release",
        "what": "a refused PUBSUB NUMSUB is a Lua error after the key was deleted: the release "
                "reports failure for a hold that was continuous",
        "edits": [("lib/core/lua/queue.lua",
                   'return type(subs) == "table" and type(subs[2]) == "number" and subs[2] > 0',
                   'return type(subs) == "table" and tonumber(subs[2]) > 0')],
        "killers": [SIM_SCRIPTS, integration("scripts", "release_without_pubsub_rights"),
                    auth("acl", "recipe_without_numsub_releases_cleanly")],
    },
    {
        "name": "lost-attempt-wakes-everyone",
        "what": "the release of a lost attempt publishes like a holder's: every waiter wakes for "
                "keys that were nobody's turn, and loses again",
        "edits": [("lib/lock/acquire.c",
                   "    redlock__round_release_everywhere(c, lock, leave, false);\n    if (lock->caller_token",
                   "    redlock__round_release_everywhere(c, lock, leave, true);\n    if (lock->caller_token")],
        "killers": [integration("notify", "lost_attempts_wake_nobody"),
                    integration("notify", "own_releases_do_not_wake")],
    },
    {
        "name": "fenced-grant-without-counter",
        "what": "a grant to a fenced waiter sets its key but does not raise the counter: the fence "
                "its client commits is not above the last holder's",
        "edits": [("lib/core/lua/release_queued.lua",
                   "        c = fence_bump(ck, c)",
                   "        c = c or \"0\"")],
        "killers": [SIM_SCRIPTS, integration("scripts", "fenced_grant_raises_the_counter"),
                    fault("grants", "fenced_waiters_take_turns")],
    },
    {
        "name": "set-granted-on-one-key",
        "what": "a set's waiter counts a node as a yes once any key of the set was granted there: "
                "two waiters of overlapping sets hold at once",
        "edits": [("lib/lock/waiter.c",
                   "    if (++node->keys == w->n_keys)",
                   "    if (++node->keys >= 1)")],
        "killers": [sim_grants(), fault("grants", "set_waiters_take_turns")],
    },
    {
        "name": "waiter-ignores-how-long-to-wait",
        "what": "a waiter's lost attempt sleeps its retry delay whatever the nodes said of the "
                "holder's keys: a crashed holder's waiter wakes a retry delay late",
        "edits": [("lib/lock/acquire.c",
                   "        if (wait < delay && delay - wait > 1000)",
                   "        if (false)")],
        "killers": [fault("grants", "waiter_wakes_when_a_crashed_holders_key_runs_out")],
    },
    {
        "name": "grant-validity-from-the-notice",
        "what": "a lock won by grants has its validity measured from when the grants were heard, "
                "not from when the attempt they answer was sent (before the keys were set)",
        "edits": [("lib/lock/waiter.c",
                   "c->opts.min_validity_ms, oldest);",
                   "c->opts.min_validity_ms, now);")],
        "killers": [sim_grants(), integration("notify", "release_grants_the_head_without_a_round")],
    },
    {
        "name": "lost-attempt-never-keeps-its-token",
        "what": "every lost attempt of a waiter is released and gets a new token, as before the "
                "grants: the release's grant is never for the waiter's token, and every handoff "
                "costs the waiter a round",
        "edits": [("lib/lock/acquire.c",
                   "    return retry && o->lock->place != NULL && status == REDLOCK_EBUSY && r != NULL &&",
                   "    return false && o->lock->place != NULL && status == REDLOCK_EBUSY && r != NULL &&")],
        "killers": [sim_grants(), integration("notify", "release_grants_the_head_without_a_round")],
    },
    {
        "name": "release-decided-before-its-status",
        "what": "a release is decided at its first answer, not once the nodes still out cannot "
                "change its status: a release a quorum would have confirmed reports no quorum",
        "edits": [("lib/core/quorum.c",
                   "    if (out == 0)\n        return true;\n    if (lapsed)",
                   "    if (true)\n        return true;\n    if (lapsed)")],
        "killers": [fault("release", "release_decided_at_the_quorum")],
    },
    {
        "name": "close-forgets-releases-out",
        "what": "a close does not wait for the deletes of releases decided at the quorum: it "
                "completes while the far nodes still hold the key",
        "edits": [("lib/lock/op.c",
                   "    close_waits(c);\n",
                   "    (void)close_waits;\n")],
        "killers": [fault("release", "close_after_release_deletes_everything")],
    },
    {
        "name": "release-waits-all-ignored",
        "what": "release_waits_all is ignored: a caller that asked for every node's answer gets "
                "the quorum's",
        "edits": [("lib/lock/hold.c",
                   "    if (r->outstanding > 0 && o->client->opts.release_waits_all)",
                   "    if (false && o->client->opts.release_waits_all)")],
        "killers": [fault("release", "release_waits_all_hears_every_node")],
    },
    {
        "name": "cluster-ask-without-asking",
        "what": "a cluster node follows ASK without ASKING first: the importing master answers "
                "MOVED back to the source, which answers ASK again, until the request gives up",
        "edits": [("lib/net/cluster.c",
                   "                               .asking = asking,",
                   "                               .asking = false,")],
        "killers": [integration("cluster", "slot_migrating_under_a_lock_loop")],
    },
    {
        "name": "cluster-moved-not-followed",
        "what": "a cluster node takes MOVED as a plain error: neither the slot map nor a refresh "
                "learns the new owner, so a migrated slot's keys are never reached",
        "edits": [("lib/net/cluster.c",
                   "int m = redlock__cluster_map_moved(&cl->map, rd.slot, host, rd.port);",
                   "int m = -1;"),
                  ("lib/net/cluster.c",
                   "                    cl->conn_of_master[m] = -1; /* looked up again: it may "
                   "have a new port */\n                want_refresh(cl);\n",
                   "                    cl->conn_of_master[m] = -1;\n")],
        "killers": [integration("cluster", "slot_migrating_under_a_lock_loop")],
    },
    {
        "name": "cluster-replica-wait-ignored",
        "what": "wait_replicas counts a master's yes whatever WAIT answered",
        "edits": [("lib/net/cluster.c",
                   "data->counter >= cl->replica_wait) {",
                   "true) {")],
        "killers": [integration("cluster", "replica_wait_counts_replicas")],
    },
    {
        "name": "cluster-no-slots-fallback",
        "what": "a cluster node whose servers refuse CLUSTER SHARDS (older than 7, or an ACL) never "
                "asks CLUSTER SLOTS: it has no slot map and votes error",
        "edits": [("lib/net/cluster.c",
                   "req->fail == REDLOCK__FAIL_SERVER) {",
                   "req->fail == REDLOCK__FAIL_SERVER && false) {")],
        "killers": [integration("cluster", "slots_when_shards_refused")],
    },
    {
        "name": "cluster-tryagain-is-final",
        "what": "a cluster node takes TRYAGAIN (a slot split half way through a migration) as its "
                "vote instead of sending the request again within its deadline",
        "edits": [("lib/net/cluster.c",
                   'if (strncmp(error, "TRYAGAIN", 8) == 0 || strncmp(error, "CLUSTERDOWN", 11) == 0)',
                   'if (strncmp(error, "CLUSTERDOWN", 11) == 0)')],
        "killers": [integration("cluster", "tryagain_while_a_slot_is_split")],
    },
    {
        "name": "cluster-keeps-round-encoding",
        "what": "a cluster node's copy of a command keeps the round's shared encoding (cmd.wire, "
                "valid only while the round sends): a redirected request goes out later as "
                "whatever bytes that buffer holds by then",
        "edits": [("lib/net/cluster.c",
                   "    cr->cmd.wire = NULL;\n    cr->cmd.wire_len = 0;\n",
                   "")],
        "killers": [integration("cluster", "slot_migrating_under_a_lock_loop"),
                    integration("cluster")],
    },
    {
        # Issue 36: a node that comes back as a new server (a restart, maybe without its data)
        # has every held lock checked at once. Without it the holder learns at its next planned
        # extension (a plain lock: only from its release) and works on while anyone may take it.
        "name": "restart-unnoticed",
        "what": "the client ignores a node that came back as a new server (a new run_id)",
        "edits": [("lib/lock/recheck.c",
                   "    c->io->on_node_changed = on_node_changed;\n",
                   "    (void)on_node_changed;\n")],
        "killers": [sim("amnesia_reported_at_once"), integration("amnesia"),
                    {"program": "test/threads/test-threads-sync",
                     "env": {"H_TEST_FILTER": "restart_empty_sets_status_at_once"}},
                    cli("cli-run", "run_lock_forgotten_by_restarts_terminates_command")],
    },
    {
        "name": "new-run-id-unseen",
        "what": "a node's reconnection never compares the server's run_id with the last one's",
        "edits": [("lib/net/node.c",
                   "    bool changed = n->server_run_id[0] != '\\0' && strcmp(n->server_run_id, run_id) != 0;",
                   "    bool changed = false;")],
        "killers": [integration("amnesia", "plain_lock_reads_as_lost"), integration("amnesia"),
                    integration("cluster", "masters_back_empty_are_noticed")],
    },
    {
        "name": "plain-lock-not-checked",
        "what": "after a node came back as a new server only auto-extended locks are checked: a "
                "plain lock a quorum forgot still reads as held",
        "edits": [("lib/lock/recheck.c",
                   "        if (held(lock, now) && !redlock__auto_recheck(lock) && lock->check.started_us == 0)\n"
                   "            check_start(lock);\n",
                   "        if (held(lock, now))\n            (void)redlock__auto_recheck(lock);\n")],
        "killers": [integration("amnesia", "inspect_finds_a_silent_loss"),
                    sim("amnesia_reported_at_once"),
                    {"program": "test/threads/test-threads-sync",
                     "env": {"H_TEST_FILTER": "restart_empty_sets_status_at_once"}}],
    },
    {
        "name": "lost-key-unnoticed",
        "what": "a round that hears a node say no where the lock's last won round had its yes "
                "(the node lost its keys without a restart) checks no other lock",
        "edits": [("lib/lock/recheck.c",
                   "        checks_due(c);\n    } else if (gap) {",
                   "    } else if (gap) {")],
        "killers": [integration("amnesia", "a_key_gone_checks_every_lock")],
    },
    {
        # What hiredis does alone: an array's slots reserved as its header says (2^31 of them for
        # a hostile node), nested as deep as it likes, freed slot by slot on the loop.
        "name": "reader-hiredis-functions",
        "what": "the bounded reader leaves hiredis's own reply functions in place: no bound on "
                "an array's elements, the nesting or a reply's objects",
        "edits": [("lib/core/reader.c",
                   "    rd->r->fn = &rd->fn;\n",
                   "    rd->r->fn = &rd->base;\n")],
        "killers": [unit("reader"), fault("hostile", "huge_array*")],
    },
    {
        "name": "reader-bulk-unbounded",
        "what": "a bulk string's announced length is not checked: it is buffered until it ends",
        "edits": [("lib/core/reader.c",
                   "            else if (len > rd->limits.max_bulk)\n",
                   "            else if (len > SIZE_MAX / 2)\n")],
        "killers": [unit("reader"), fault("hostile", "trickled_bulk*")],
    },
    {
        "name": "scrub-keeps-password",
        "what": "a server's error text keeps the password it repeats",
        "edits": [("lib/core/scrub.c",
                   "        if (secret_len > 0 && (m == secret_len || quoted)) {",
                   "        if (secret_len > 0 && m > secret_len) {")],
        "killers": [unit("scrub"),
                    {"program": "test/auth/test-auth", "build": ["tools/redlock"],
                     "env": {"H_TEST_FILTER": "server_repeating_the_password",
                             "REDLOCK_TOOL": "tools/redlock"}}],
    },
    {
        "name": "node-errors-not-scrubbed",
        "what": "the node layer keeps a server's error text as it came (scrub.c never called)",
        "edits": [("lib/net/node.c",
                   "    redlock__scrub_error(r, n->cfg.url->password);\n",
                   "")],
        "killers": [{"program": "test/auth/test-auth", "build": ["tools/redlock"],
                     "env": {"H_TEST_FILTER": "server_repeating_the_password",
                             "REDLOCK_TOOL": "tools/redlock"}},
                    cli("cli", "server_text_is_printable")],
    },
    {
        "name": "scrub-keeps-control-bytes",
        "what": "a server's error text keeps its control bytes (an escape sequence reaches the "
                "terminal)",
        "edits": [("lib/core/scrub.c",
                   "        text[w++] = c >= 0x20 && c < 0x7f ? (char)c : '?';",
                   "        text[w++] = (char)c;")],
        "killers": [unit("scrub"), cli("cli", "server_text_is_printable")],
    },
    {
        "name": "tls-cn-fallback",
        "what": "a host name is matched against the certificate's CN when it has no "
                "subjectAltName",
        "edits": [("lib/net/tls.c",
                   " |\n                                      X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);",
                   ");")],
        "killers": [{"program": "test/tls/test-tls",
                     "env": {"H_TEST_FILTER": "cn_only_certificate_refused"}}],
    },
    {
        "name": "url-quotes-stray-password",
        "what": "a URL that lost its @host (redis://user:secret) is quoted whole in its error",
        "edits": [("lib/core/url.c",
                   "        return stray_span(text, authority, start, end);",
                   "        return 0;"),
                  ("lib/core/url.c",
                   "        if (parse_decimal(digits, 1, 65535, port) != 0) {\n"
                   "            if (!quote_port)",
                   "        if (parse_decimal(digits, 1, 65535, port) != 0) {\n"
                   "            if (!quote_port && false)")],
        "killers": [unit("url")],
    },
    {
        "name": "tool-splits-at-any-comma",
        "what": "the tool splits a node list at every comma, a password's included",
        "edits": [("tools/args.c",
                   "        const char *end = url_end(p);\n",
                   "        const char *end = strchr(p, ',') ? strchr(p, ',') : url_end(p);\n")],
        "killers": [cli("cli-args")],
    },
    {
        "name": "cluster-allow-ignored",
        "what": "a cluster node connects to any master its cluster names, whatever allow= says",
        "edits": [("lib/net/cluster.c",
                   "    if (!redlock__cluster_allow_has(cl->cfg.url, host))\n",
                   "    if (false)\n")],
        "killers": [integration("cluster", "masters_kept_within_allow")],
    },
    {
        "name": "nodes-file-mode-unchecked",
        "what": "a --nodes-file with a password that others can read draws no warning",
        "edits": [("tools/redlock.c",
                   "has_password && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)",
                   "has_password && false)")],
        "killers": [cli("cli-signals", "nodes_file*")],
    },
    # Issue 33: the scoped holds, the blocking lock's loss seen on the caller's side, cancel
    # tokens.
    {
        "name": "using-loss-untold",
        "what": "redlock_using's work is not told when auto-extension finds its lock lost",
        "edits": [("lib/api/using.c",
                   "    if (u->lost_cb != NULL)\n        u->lost_cb(lock, reason, u->lost_data);\n",
                   "")],
        "killers": [integration("using", "loss_during_the_work_is_told")],
    },
    {
        "name": "using-loss-ends-lapsed",
        "what": "a hold of redlock_using lost during the work ends as lapsed (the release's), "
                "not as lost with the reason the work was told",
        "edits": [("lib/api/using.c",
                   "    u->lost_reason = reason;",
                   "    (void)reason;")],
        "killers": [integration("using", "loss_during_the_work_is_told")],
    },
    {
        "name": "using-lapse-ends-released",
        "what": "a hold of redlock_using whose release found it lapsed ends as released",
        "edits": [("lib/api/using.c",
                   "        end = status == 0 ? REDLOCK_HOLD_RELEASED : REDLOCK_HOLD_LAPSED;",
                   "        end = REDLOCK_HOLD_RELEASED;")],
        "killers": [integration("using", "lapsed_hold_is_reported")],
    },
    {
        "name": "sync-with-loss-ends-lapsed",
        "what": "redlock_sync_with's function saw the loss, and the hold ends lapsed, not lost",
        "edits": [("lib/sync/sync_with.c",
                   "    } else if (redlock__sync_status_lost(lost)) {",
                   "    } else if (false) {")],
        "killers": [{"program": "test/threads/test-threads-sync_with",
                     "env": {"H_TEST_FILTER": "with_loss_is_seen"}}],
    },
    {
        "name": "sync-lost-flag-never-set",
        "what": "redlock_sync_lock_lost reads false after the lock was lost",
        "edits": [("lib/sync/sync_lost.c",
                   "    return lock != NULL &&\n",
                   "    return lock == NULL &&\n")],
        "killers": [{"program": "test/threads/test-threads-sync_with",
                     "env": {"H_TEST_FILTER": "with_loss_is_seen"}}],
    },
    {
        "name": "sync-loss-fd-silent",
        "what": "a blocking lock's loss descriptor never becomes readable when the loop thread "
                "sees the loss",
        "edits": [("lib/sync/sync_lost.c",
                   "    if (atomic_load(&sl->lost_fd) >= 0)\n        fd_poke(atomic_load(&sl->lost_wfd));\n",
                   "")],
        "killers": [{"program": "test/threads/test-threads-sync_with",
                     "env": {"H_TEST_FILTER": "with_loss_is_seen"}}],
    },
    {
        "name": "canceler-fired-before-ignored",
        "what": "a canceler fired before the call does not stop it: the acquire is sent",
        "edits": [("lib/api/acquire_call.c",
                   "    if (redlock_canceler_fired(opts->cancel))",
                   "    if (false)"),
                  ("lib/lock/canceler.c",
                   "    if (atomic_load(&canceler->fired)) {",
                   "    if (false) {"),
                  ("lib/sync/sync.c",
                   "    if (redlock_canceler_fired(req.opts.cancel)) {",
                   "    if (false) {")],
        "killers": [integration("using", "canceler_fired_before_the_call"),
                    {"program": "test/threads/test-threads-sync_with",
                     "env": {"H_TEST_FILTER": "with_cancelers"}}],
    },
    {
        "name": "canceler-fire-wakes-nobody",
        "what": "firing a canceler sets it but wakes no loop: acquires already waiting go on",
        "edits": [("lib/lock/canceler.c",
                   "        reg->notify(reg);\n",
                   "        (void)reg;\n")],
        "killers": [integration("using", "canceler_cancels_a_wait"),
                    {"program": "test/threads/test-threads-sync_with",
                     "env": {"H_TEST_FILTER": "canceler_shared_by_async_and_sync"}}],
    },
    {
        "name": "canceler-cancels-everything",
        "what": "a fired canceler cancels every pending operation of the clients it wakes, "
                "not only those that carry it",
        "edits": [("lib/lock/op.c",
                   "        if (!redlock__canceler_reg_fired(&o->cancel))\n            continue;\n",
                   "")],
        "killers": [integration("using", "canceler_shared_by_two_clients")],
    },
    {
        "name": "noauth-taken-for-an-acl",
        "what": "a NOAUTH to SCRIPT LOAD (the URL gives no password) is put up with as an ACL's "
                "refusal: the node seems up and says \"allow +script|load\"",
        "edits": [("lib/core/handshake.c",
                   "        if (auth != NULL) {",
                   "        if (auth != NULL && step->kind == REDLOCK__HANDSHAKE_STATUS) {")],
        "killers": [unit("handshake"), auth("auth", "missing_password_is_named")],
    },
    {
        "name": "text-cut-mid-word",
        "what": "a text too long for its buffer is cut at the last byte that fits, inside a word",
        "edits": [("lib/core/common.c",
                   "    while (cut > 0 && text[cut] != ' ')\n        cut--;\n",
                   "")],
        "killers": [unit("text"), integration("node", "long_server_error_is_cut_after_a_word")],
    },
    {
        "name": "resource-max-not-enforced",
        "what": "a resource over REDLOCK_RESOURCE_MAX is sent to the nodes",
        "edits": [("lib/lock/client.c",
                   "        if (len > REDLOCK_RESOURCE_MAX - total) {\n",
                   "        if (len > 64 * REDLOCK_RESOURCE_MAX - total) {\n")],
        "killers": [{"program": "test/misuse/test-misuse"}, integration("multi"),
                    {"program": "test/threads/test-threads-sync",
                     "env": {"H_TEST_FILTER": "calls_report_bad_arguments"}}],
    },
    {
        "name": "fence-domain-not-shared",
        "what": "a lock that names a fence domain takes its fence from its resource's own counter: "
                "fences of the domain's resources do not grow across them, and every resource "
                "leaves a counter",
        "edits": [("lib/api/acquire_call.c",
                   "        redlock__lock_set_fence_domain(lock, opts->fence_domain) != 0) {",
                   "        false) {")],
        "killers": [integration("fence_domain", "fences_grow_across_resources"),
                    cli("cli-fence", "domain_shared_by_keys")],
    },
    {
        "name": "fence-domain-grant-own-counter",
        "what": "a release grants a waiter of a fence domain a fence from the key's own counter, "
                "not the domain's: below the last holder's",
        "edits": [("lib/core/lua/release_queued.lua",
                   "    local ck = r.ck or key .. \":fence\"",
                   "    local ck = key .. \":fence\"")],
        "killers": [SIM_SCRIPTS, integration("fence_domain", "waiter_in_the_domain_follows*")],
    },
    {
        "name": "fence-domain-waiter-own-counter",
        "what": "a waiter of a fence domain takes its fence from its key's own counter",
        "edits": [("lib/core/lua/acquire_queued.lua",
                   "    ck = ARGV[10]\n",
                   "    ck = KEYS[1] .. \":fence\"\n")],
        "killers": [SIM_SCRIPTS, integration("fence_domain", "waiter_in_the_domain_follows*")],
    },
]
