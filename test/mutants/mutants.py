"""mutants.py - the broken libraries the suite must notice (test/mutants/run applies them).

Each mutant breaks lib/ in one known way: a list of (file, text, replacement) edits, each text
found exactly once in the file as it is today (so a refactor that moves the code makes the
mutant fail loudly as "not applicable" instead of silently testing nothing), and the killers to
try, fastest first. A killer is a test program of the build, with the environment that picks the
cases that should notice. The run stops at the first killer that fails.
"""

SIM = "test/sim/test-sim"


def sim(test):
    return {"program": SIM, "env": {"SIM_TEST_FILTER": test}}


def integration(program, cases="*"):
    return {"program": "test/test-" + program, "env": {"H_TEST_FILTER": cases}}


def pitfall(program, cases="*"):
    return {"program": "test/pitfalls/test-pitfall-" + program, "env": {"H_TEST_FILTER": cases}}


def torture(seconds=10):
    return {"program": "test/torture/torture", "args": ["--seconds", str(seconds)]}


MUTANTS = [
    {
        "name": "quorum-of-one",
        "what": "a round is won by the first yes (quorum 1 instead of N/2+1)",
        "edits": [("lib/quorum.c",
                   "round->quorum = n_nodes / 2 + 1;",
                   "round->quorum = 1;")],
        "killers": [sim("safety_holds"), integration("faults", "two_nodes_down*"),
                    pitfall("4-failover", "failover_before_replication*"), torture()],
    },
    {
        "name": "no-drift",
        "what": "the clock-drift allowance is not subtracted from the validity",
        "edits": [("lib/quorum.c",
                   "return left_us > round->drift_us ? left_us - round->drift_us : 0;",
                   "return left_us;")],
        "killers": [sim("safety_holds"), integration("lock", "lock_is_free_again_after_ttl"),
                    integration("extend"), torture()],
    },
    {
        "name": "validity-from-decision",
        "what": "validity measured from the deciding vote instead of the round's start",
        "edits": [("lib/quorum.c",
                   "uint64_t elapsed_us = now_us > round->start_us ? now_us - round->start_us : 0;",
                   "uint64_t elapsed_us = 0;")],
        "killers": [sim("safety_holds"), integration("lock", "lock_is_free_again_after_ttl"),
                    torture()],
    },
    {
        "name": "release-without-compare",
        "what": "release deletes the key whatever token it holds",
        "edits": [("lib/scripts.c",
                   '    "if redis.call(\\"get\\", KEYS[1]) == ARGV[1] then\\n"',
                   '    "if true then\\n"'),
                  ("lib/scripts.c",
                   '"4123ec057c25a9feb4eb12cb191520152206624e"',
                   '"@SHA1:release@"')],
        "killers": [integration("lock", "release_with_wrong_token*"), integration("scripts"),
                    pitfall("3-fixed-del"), torture()],
    },
    {
        "name": "acquire-without-ttl",
        "what": "the acquire's SET has no PX: a holder that dies leaves a key that never expires",
        "edits": [("lib/command.c",
                   '        ARG("NX", 2);\n        ARG("PX", 2);\n'
                   '        ARG(ttl, (size_t)ttl_len);\n',
                   '        ARG("NX", 2);\n')],
        "killers": [pitfall("1-setnx-expire"), integration("lock", "lock_is_free_again_after_ttl")],
    },
    {
        "name": "no-release-everywhere",
        "what": "a lost acquire round leaves its keys where it got them",
        "edits": [("lib/ops.c",
                   "    release_everywhere(c, lock);\n    /* Every attempt gets a token",
                   "    /* Every attempt gets a token")],
        "killers": [integration("faults", "lost_round_leaves_no_key"),
                    integration("faults", "three_nodes_down_fails_fast*"), sim("safety_holds")],
    },
    {
        "name": "extend-without-compare",
        "what": "extend renews the key whatever token it holds",
        "edits": [("lib/scripts.c",
                   '    "if v == ARGV[1] then\\n"',
                   '    "if v ~= false then\\n"'),
                  ("lib/scripts.c",
                   '"e8d0177eea86a7a2517ed17a5fc662d1c3f5b5df"',
                   '"@SHA1:extend@"')],
        "killers": [integration("extend", "extend_fails_when_quorum_lost_the_key"),
                    integration("scripts"), integration("autoextend")],
    },
    {
        "name": "token-16-bits",
        "what": "tokens carry 16 bits of randomness instead of 128",
        "edits": [("lib/ops.c",
                   "    int rc = c->io->ops->random(c->io, raw, sizeof(raw));\n",
                   "    int rc = c->io->ops->random(c->io, raw, sizeof(raw));\n"
                   "    memset(raw + 2, 0, sizeof(raw) - 2);\n")],
        "killers": [integration("tokens"), integration("lock", "tokens_are_random")],
    },
    {
        "name": "auto-never-reports-loss",
        "what": "auto-extension never calls the lost callback",
        "edits": [("lib/autoextend.c",
                   "    a->lost_cb(lock, reason, a->lost_data);\n",
                   "    (void)reason;\n")],
        "killers": [sim("auto_extension_safe"), integration("autoextend"),
                    pitfall("5-no-renewal", "auto_extension_reports_a_loss*")],
    },
    {
        "name": "release-without-deadline",
        "what": "release requests have no deadline: a silent node holds the release forever",
        "edits": [("lib/node.c",
                   "    req->sent_us = now;\n    req->deadline_us = now + n->cfg.timeout_us;\n"
                   "    if (n->state == NODE_CLOSING) {",
                   "    req->sent_us = now;\n"
                   "    req->deadline_us = req->cmd->kind == REDLOCK__CMD_RELEASE\n"
                   "                           ? UINT64_MAX : now + n->cfg.timeout_us;\n"
                   "    if (n->state == NODE_CLOSING) {")],
        "killers": [integration("faults", "paused_node_does_not_delay_or_confuse"),
                    integration("node"), integration("faults")],
    },
    {
        "name": "late-reply-matched",
        "what": "after a timeout, the late reply is matched to the next request",
        "edits": [("lib/node.c",
                   "        n->skip_replies++; /* its reply, if it ever comes, is read and dropped */\n",
                   "")],
        "killers": [integration("node"), integration("faults"), torture()],
    },
]
