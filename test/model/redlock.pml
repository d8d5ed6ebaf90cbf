/* SPDX-License-Identifier: MIT */
/* redlock.pml - the protocol of libredlock as a Promela model for Spin (docs/safety.md, "What the
 * proofs cover"): N Redis nodes, two clients, one resource; acquire (plain or fenced, in the
 * waiters' queue), grants, the fencing commit, extend (with and without retake), release, and
 * the lost attempt's release everywhere; connections that drop or go half-open, requests that
 * time out, nodes that crash and restart with or without their data. test/model/run checks it,
 * and builds the broken variants below.
 *
 * Time is not counted but ordered. Every round's validity ends at its deadline, which may come
 * at any moment after the round was sent; a client's deadlines come in the order its rounds were
 * sent. A key a round set may expire at any moment after that round's deadline, not before: that
 * is the bounded drift (a key lives ttl on its node's clock, the validity ends ttl - drift on the
 * client's). A waiter's place in the queue may expire at any moment after its last attempt. A
 * node that restarts empty stays away until its key has expired (the delayed restart).
 * Everything else may happen in any order, and a client that takes no step meanwhile is paused.
 * So every schedule a real clock allows is here, and more: what holds here holds for every ttl,
 * drift and timing. Whether a deadline passed, a key expired or a place expired is decided when
 * someone looks (a node's script, the client's decision), as Redis expires keys lazily: each
 * answer consistent with what was seen before is explored, without an event of its own.
 *
 * One model for the right protocol and the broken ones, and for every scope: test/model/run
 * builds it once per node count (spin -DN=...) and chooses at run time, from the environment
 * (read by init), what each search explores:
 *   RL_BROKEN   the broken variants to build in (a sum; 0: the protocol as designed):
 *                 1  fence_commit = quorum, not quorum + 1, while a node may restart empty
 *                 2  a key may expire before the deadline of the round that set it (drift past
 *                    the allowance)
 *                 4  a grant counted per subscriber connection that heard it, not per node
 *                 8  a grant's validity counted from the grant, not from the attempt's send
 *                16  a node that restarts empty comes back at once (no delayed restart)
 *                32  a grant counted for the node its tag names, not the node that delivered it
 *                64  a fenced grant's counter trusted: a granting node whose counter + 1 is the
 *                    fence is taken as committed, and gets no commit
 *               128  a retake that proves continuity: a won extend with retake makes the hold
 *                    continuous again, whatever nodes came back as new servers meanwhile
 *               256  continuity while the nodes known to keep the token are a quorum, a won
 *                    round's yes voters becoming them, though fewer than a quorum of its yes
 *                    votes came from nodes that kept it (one silent may be back empty, unseen);
 *                    under RL_LIBRULE, no node is fresh: a yes that would make a node fresh
 *                    (a key set anew too) makes it kept
 *               512  the library's old continuity rule of lib/lock/recheck.c and lib/lock/lock.c (kept and
 *                    fresh nodes, late yes votes; see keptm below), which this model refutes:
 *                    a kept node that did not answer a won round keeps counting though its key
 *                    may expire once that round moved the deadline, and a late yes to a
 *                    retake (set anew) starts the kept nodes afresh
 *              1024  under RL_LIBRULE: a re-created key counts as a renewal (the extend
 *                    script's 2 read as 1)
 *              2048  under RL_LIBRULE: a late yes is kept at once (fresh nodes join the kept
 *                    ones without the heard evidence)
 *              4096  under RL_LIBRULE: a pending node counts past its deadline (the loss
 *                    check counts K & P whether or not pending_until passed)
 *   RL_OPS0, RL_OPS1   acquire operations of client 0 and 1 (default 1 each)
 *   RL_ATT0, RL_ATT1   attempts per operation (default 1 and 2)
 *   RL_FEN0, RL_FEN1   0: plain locks, 1: fenced, 2: either (default 2 and 0)
 *   RL_EXTS            extends per hold, 0 or 1 (default 0)
 *   RL_KEEP0           1: client 0 neither extends nor releases its hold (its keys expire)
 *   RL_HELD            1: client 0 starts with its first operation won, its key on every node;
 *                      2: on as few nodes as a won round needs
 *   RL_FAULTS          faults in all (default 0), of the kinds in RL_FKINDS (a sum of the F_
 *                      below, default all); RL_EMPTIES empty restarts (default 1)
 *   RL_HOSTILE         1: node N - 1 is hostile: it runs no script but votes anything (any
 *                      counter), and publishes up to RL_FORGE (default 2) grants of its own on
 *                      each channel it carries, with any token it was sent, any stamp, tag and
 *                      counter. Its key counts as backing anyone's hold (a hostile node costs its
 *                      own vote); its forged wake-ups are the waiter's retry, which may come at
 *                      any time anyway
 *   RL_LIBRULE         1: continuity by kept, fresh and pending nodes, the rule of issue 39
 *                      (see keptm below), not by the kept nodes among a won round's yes voters
 *   RL_AMNESIA         1: a node restarts empty at once (the delayed restart broken on purpose),
 *                      and its clients are told of a new server when they reconnect (the
 *                      handshake's run_id): mutual exclusion and the keys' backing are not
 *                      asserted (their assumption is broken), only that no hold is reported
 *                      continuous across the gap (client 1, the competitor, may take and release
 *                      the lock inside it)
 * A build with -DLIVE has no faults and checks the liveness claim of the queue (at the end).
 *
 * Also abstracted (docs/safety.md): one resource (no sets), no cluster nodes; a wake-up (a hint)
 * is the waiter's retry, which may come at any time; a waiter's place is a number that grows with
 * every operation (the wall clock when it began to wait, the same on every node). */

#ifndef N
#define N 3
#endif
#define Q (N / 2 + 1)
#define NC 2
#define F_CRASH 1   /* a node crashes */
#define F_DROP 2    /* a command connection drops */
#define F_LOST 4    /* ... right after the node ran a request: the reply is lost */
#define F_TIMEOUT 8 /* a request times out (and still runs later) */
#define F_UNSUB 16  /* a subscriber connection drops */
#define F_DEAF 32   /* ... or goes half-open, the node still counting it */
#define B_COMMIT 1
#define B_DRIFT 2
#define B_SUBSCRIBER 4
#define B_GRANT_START 8
#define B_NO_DELAY 16
#define B_TAG 32
#define B_PRECOUNT 64
#define B_RETAKE 128
#define B_KEPTSIZE 256
#define B_LIBRULE 512
#define B_RECREATED 1024
#define B_LATEKEPT 2048
#define B_PASTDUE 4096
/* The kept-and-fresh rule: the library's old one (BROKEN_LIBRULE, OLDLIB), or the rule of issue
 * 39 (RL_LIBRULE=1, LIBFIX): kept, fresh and pending nodes, heard evidence */
#define LIBRULE (librule || BROKEN(B_LIBRULE))
#define LIBFIX (librule && !BROKEN(B_LIBRULE))
#define OLDLIB BROKEN(B_LIBRULE)
#define HOSTILE(x) (hostile && (x) == N - 1)
#define MAY(k) (faults > 0 && (fkinds & (k)))
#define BROKEN(b) ((broken & (b)) != 0)
#define FENCE_COMMIT (BROKEN(B_COMMIT) -> Q : Q + 1) /* quorum + 1 tolerates one empty restart */
#ifdef LIVE
/* The liveness scope has no faults: a connection is never dropped as full (a fenced waiter's
 * lost attempt leaves its commit, its release and its next acquire on a node that lags). */
#define RQCAP 4
#else
#define RQCAP 3 /* requests in flight on one connection; one more drops it */
#endif
#ifdef LIVE
/* The liveness scope: client 0 holds, and releases only once client 1 waits in the queue; the
 * waiter waits for the grants, and retries (the wake-up) only once the holder's release is done. */
#define RETRY(c) 1
#define RETRY_NOW(c) (cs[0] == IDLE)
#define HOLD_ENDS(c) ((c) != 0 || cs[1] == SLEEP)
#else
#define RETRY(c) (attleft[c] > 0)
#define RETRY_NOW(c) RETRY(c)
#define HOLD_ENDS(c) ((c) != 0 || !keep0)
#endif

/* The scope and the variant: set once by init, never changed, so not part of the state. */
hidden short broken;
hidden byte att0, att1, fen0, fen1, exts, fkinds, held, hostile, amnesia, keep0, librule;
/* Whether continuity needs the kept nodes tracked: only a retake re-creates a key (without one,
 * a node's yes shows that it kept the token since the acquire) and only RL_AMNESIA tells of new
 * servers. Elsewhere the tracking would only multiply the states. */
hidden byte track;

c_decl {
    /* A knob from the environment (test/model/run sets them), or its default. */
    static int rl_knob(const char *name, int dflt)
    {
        const char *v = getenv(name);
        return v != NULL && *v != '\0' ? atoi(v) : dflt;
    }
}

/* A client's deadlines: one per attempt with its current token (the last one a claim of capped
 * grants), one for BROKEN_GRANT_START's grant, one for its extend. */
#define MAXATT 3
#define GS MAXATT
#define XS (MAXATT + 1)
#define NS (MAXATT + 2)
#define DL(c, s) dl[(c) * NS + (s)]
#define RUNNING 1
#define PASSED 2

/* requests */
#define K_ACQ 1    /* the queued acquire script, plain or fenced */
#define K_COMMIT 2 /* the fencing commit */
#define K_EXT 3    /* compare-and-pexpire; with retake, set where free */
#define K_REL 4    /* a holder's release: compare-and-delete, then the grant to the head */
#define K_DROP 5   /* a lost attempt's release everywhere: no reply read, no grant */
#define K_LEAVE 6  /* the same, the waiter leaving the queue too (it gives up) */
/* votes */
#define VY 1
#define VN 2
#define VE 3
#define VT 4
#define VR 5 /* an extend's yes for a key its retake set anew (the script's 2; LIBFIX only) */
/* a client's state */
#define IDLE 0
#define RUN 1   /* a round in flight; rk says which */
#define SLEEP 2 /* a waiter between attempts */
#define HOLD 3  /* holds the lock, no round in flight */
/* why a round was lost */
#define ST_BUSY 1
#define ST_NOQUORUM 2
#define ST_EXPIRED 3

/* ---- nodes ---- */
byte ktok[N];  /* the key's token (0: no key) */
byte kbind[N]; /* the deadline after which it may expire: 1 + c * NS + s (0: any time) */
byte ctr[N];   /* the fencing counter */
bit up[N];
/* the queue: waiter c at node x is at c * N + x */
bit inq[NC * N];
byte qplace[NC * N]; /* its place */
byte grtok[NC * N];  /* its grant record: the token (0: none) */
byte grst[NC * N];   /* and the stamp: which attempt with that token */

/* ---- connections of client c to node x, at c * N + x ---- */
bit cup[NC * N];    /* the command connection is up */
bit listen[NC * N]; /* the subscriber connection is up (PUBSUB NUMSUB > 0 on the node) */
bit deaf[NC * N];   /* ... but half-open: what the node publishes there is lost */
chan rq[NC * N] = [RQCAP] of { byte, byte, byte }; /* kind, token, argument */
byte stale[NC * N]; /* requests at the head of rq from an earlier round: no vote of this one */
/* grant: token, stamp, capped, counter, tag (the node its text names) */
chan gch[NC * N] = [2] of { byte, byte, byte, byte, byte };
chan gdup[NC] = [2] of { byte, byte, byte, byte, byte }; /* node 0's grants, heard again */
bit newsrv[NC * N]; /* RL_AMNESIA: the client is still to hear that the node is a new server */
/* The hostile node was sent client c's current token, in the attempt with stamp hst. */
bit hsent[NC];
byte hst[NC];
byte forge;         /* the forged grants the hostile node may still publish */

/* ---- clients ---- */
byte cs[NC], rk[NC];
byte tok[NC], ntok[NC];
byte opsleft[NC], attleft[NC], att[NC], extleft[NC];
byte place[NC];
byte nextplace;
bit fenced[NC];
byte dl[NC * NS];  /* each deadline: 0 unused, RUNNING, PASSED */
byte rslot[NC];    /* the deadline of the round in flight */
byte hslot[NC];    /* 1 + the deadline of the hold */
byte vote[NC * N]; /* this round's vote per node */
byte cnt[NC * N];  /* the counter a fenced acquire's yes read */
byte nyes[NC], nno[NC], nerr[NC], nto[NC];
byte maxc[NC]; /* the largest counter among the acquire's yes votes */
byte fence[NC];
bit hold[NC], lapsed[NC], late[NC], retake[NC];
byte gmask[NC];    /* grants heard for the current token: a bit per node */
byte gnode[NC];    /* the nodes they came from (gmask, except under BROKEN_SUBSCRIBER) */
bit gcap[NC];      /* one of them was capped by the waiter's place deadline */
byte gold[NC];     /* the oldest attempt they name */
byte gcnt[NC * N]; /* the counter each granting node read */
/* Continuity (docs/safety.md): the nodes known to have kept the token since the hold's last won
 * round (they voted yes in it, and since then have neither come back as a new server nor said
 * no); lost: fewer than a quorum are, so the hold is lost (ELOST) whatever a retake wins.
 * Under BROKEN_LIBRULE, the library's rule (lock.c redlock__lock_kept_yes, recheck.c, round.c
 * late_yes): keptm, a won round's counted yes voters join it (all of it said yes: they replace
 * it, none fresh), a new server or a no leaves it; freshm, the nodes a won round added while
 * some kept node was not heard; lostk, the gap: a held lock's kept nodes less the fresh ones
 * fell below a quorum; a won extend continues while the kept nodes are a quorum, a release
 * while there was no gap. chg: the nodes heard of as new servers since the round in flight
 * began (their yes is the old server's); the last won round, for a late yes to it: its counted
 * yes voters (wyes), the nodes still to answer it (wpend), its request (wk, wa) and chg since
 * it began (chgw).
 * RL_LIBRULE=1 (LIBFIX), the rule of issue 39: keptm is K, the nodes whose key is known to have
 * held the token continuously since before a moment at which the hold was proven continuous;
 * freshm is F, nodes that hold it (a yes) but whose key may have been set later; pendm is P, the
 * nodes of K that did not renew in the last won extend, their keys bound to the deadline before
 * it, pslot (1 + its slot: "now < pending_until" is whether that deadline has not passed,
 * decided when the loss check looks, as every deadline). A won acquire: K = its yes votes (less
 * the nodes heard of as new servers), F = P = 0; a later yes to it (wk, wa) joins F. An extend's
 * answer (ext_answer): 1 (renewal) from a node not in K joins F, from one in P late to the last
 * won extend (wq) leaves P; 2 (set anew by the retake) leaves K, joins F; no leaves K and F, and
 * so does a retake's error or timeout. Each yes that joins F is a fresh event (fresh_since): hrd
 * is the nodes heard since (a reply, yes or no, to a request sent after it: bfr counts, per
 * connection, the requests that were on the wire at the event; a reply to a request that timed
 * out is not read). F joins K once a quorum of K \ P were heard (promote), checked before every
 * decision and loss check. An extend is continuous once a quorum of K renewed (1) in it, a
 * release once a quorum of K said yes; ELOST once out of reach. After any node leaves K, the
 * loss check: |K \ P| + (pending_until not passed ? |K & P| : 0) below a quorum is a loss
 * (lostk, lapsed: ELOST at once, whatever a retake wins), never cleared. */
byte keptm[NC];
byte freshm[NC];
bit lostk[NC];
byte chg[NC], chgw[NC], wyes[NC], wpend[NC], wk[NC], wa[NC];
byte pendm[NC];   /* P */
byte pslot[NC];   /* 1 + the slot of pending_until (0: none) */
byte hrd[NC];     /* the nodes heard since the last fresh event (kept at 0 while F is empty) */
byte bfr[NC * N]; /* the requests on the wire at the last fresh event, not yet answered */
byte wq[NC * N];  /* 1 + the requests ahead of the last won extend's (0: none on the wire) */

/* ---- ghosts: what the assertions compare; the protocol never reads them ---- */
bit gap[NC];    /* the hold's validity ran out, or another client won, since it was won */
byte lastfence; /* the fence of the last fenced grant */
byte faults;
byte empties;
bit won1; /* LIVE: client 1 was granted the lock */
bit gapk[NC]; /* since the hold was won, fewer than a quorum of nodes held its token at some
               * moment (a hostile node holds anything), or another client won */
byte emptied;   /* empty restarts so far */

/* scratch: not part of the state (and named apart from pan.c's own variables) */
hidden byte m_x1, m_x2, m_x3, m_k1, m_k2, m_h, m_v, m_s, m_t, m_a, m_b, m_d, m_f;
hidden byte m_again; /* settle: the round of the client at hand may be decided */
hidden byte m_y1, m_y2, m_z1, m_z2, m_z3, m_g, m_cf, m_cp, m_cs;
/* LIBFIX's scratch: the reply at hand timed out (m_to), its request was sent after the last
 * fresh event (m_af), it answers the last won extend (m_lw); node left K (m_lv) */
hidden byte m_to, m_af, m_lw, m_lv, m_v2, m_i, m_n1, m_n2, m_pk, m_held, m_rn, m_w;
hidden byte m_q1, m_q2, m_q3;
hidden byte m_ax, m_av, m_ak, m_art, m_alw, m_j; /* rule_answer's: 1 + the node, what it said */
hidden byte m_gy, m_gn, m_gj; /* the ghost's */

/* ---- time ----------------------------------------------------------------------------------- */

/* Client c's deadlines up to s pass (they come in the order of the rounds' sends); a hold whose
 * deadline passes has a gap from then on. */
inline pass_upto(c, s)
{
    for (m_k2 : 0 .. s) {
        if
        :: DL(c, m_k2) == RUNNING ->
            DL(c, m_k2) = PASSED;
            printf("NOTE client %d: deadline %d passes\n", c, m_k2);
            if :: hold[c] && hslot[c] == m_k2 + 1 -> gap[c] = 1 :: else -> skip fi
        :: else -> skip
        fi
    }
}

/* Has client c's deadline s passed? Once it has, it stays passed; until then, either answer (but
 * the liveness claim assumes that a round is decided within its validity). */
inline look_deadline(c, s)
{
    if
    :: DL(c, s) == RUNNING -> skip
#ifndef LIVE
    :: DL(c, s) == RUNNING -> pass_upto(c, s)
#endif
    :: DL(c, s) != RUNNING -> skip
    fi
}

/* Ghost: the hold of client c (held, or its extend in flight) has a gap from now on if fewer than
 * a quorum of nodes hold its token now: the true keys, whatever the client knows of them. A key
 * set for the hold while it is held counts from the moment it is set, one lost (expired, gone in
 * an empty restart) no longer does; a hostile node holds anything (it costs its own vote only). */
inline ghost_check(c)
{
    if
    :: track && !gapk[c] && (cs[c] == HOLD || (cs[c] == RUN && rk[c] == K_EXT)) ->
        m_gn = 0;
        for (m_gy : 0 .. N - 1) {
            if :: ktok[m_gy] == tok[c] || HOSTILE(m_gy) -> m_gn++ :: else -> skip fi
        }
        if
        :: m_gn < Q ->
            printf("NOTE ghost: client %d's token is held by %d nodes: a gap\n", c, m_gn);
            gapk[c] = 1
        :: else -> skip
        fi;
        m_gy = 0;
        m_gn = 0
    :: else -> skip
    fi
}

/* Ghost: node x may no longer hold the token of a client that counts on it. */
inline ghost_kept(x)
{
    for (m_z1 : 0 .. NC - 1) { ghost_check(m_z1) }
}

/* Has node x's key expired? Not before the deadline it is bound to (so that deadline has passed
 * if it has); under BROKEN_DRIFT, at any time. */
inline look_key(x)
{
    if
    :: ktok[x] == 0 -> skip
#ifdef LIVE
    /* The liveness scope: every round is decided within its validity, so a key bound to a
     * deadline stays; one nobody counts on expires when seen, as time would make it. */
    :: ktok[x] != 0 && kbind[x] != 0 -> skip
#else
    :: ktok[x] != 0 -> skip
    :: ktok[x] != 0 && kbind[x] != 0 ->
        m_y1 = (kbind[x] - 1) / NS;
        m_y2 = (kbind[x] - 1) % NS;
        pass_upto(m_y1, m_y2);
        printf("NOTE node %d: key %d expires\n", x, ktok[x]);
        ktok[x] = 0;
        kbind[x] = 0
#endif
    :: ktok[x] != 0 && kbind[x] == 0 -> ktok[x] = 0
    :: BROKEN(B_DRIFT) && ktok[x] != 0 && kbind[x] != 0 ->
        ktok[x] = 0; /* before its deadline */
        kbind[x] = 0
    fi;
    ghost_kept(x)
}

/* Ghost: node x is about to set a key with client w's token tk. While w holds, each other key of
 * its hold that may expire before its deadline (bound to an older deadline, or to none) may have
 * expired already, unseen: the moment of an expiry nobody looked at is chosen here, so that a
 * moment with fewer than a quorum before the new key is set is not skipped over. */
inline ghost_join(w, x, tk)
{
    if
    :: track && !gapk[w] && tk == tok[w] && tk != 0 && ktok[x] != tk &&
       (cs[w] == HOLD || (cs[w] == RUN && rk[w] == K_EXT)) ->
        for (m_gj : 0 .. N - 1) {
            if
            :: m_gj != x && ktok[m_gj] == tok[w] && !HOSTILE(m_gj) &&
               kbind[m_gj] != w * NS + hslot[w] -> look_key(m_gj)
            :: else -> skip
            fi
        }
        m_gj = 0
    :: else -> skip
    fi
}

/* ---- the node's scripts -------------------------------------------------------------------- */

/* The deadline a key set now by client c's round with deadline s may not expire before: none
 * for a token the client has left (its keys are released, or expire unseen). */
#define BIND(c, tk, s) (tk == tok[c] && tk != 0 -> 1 + (c) * NS + (s) : 0)

inline leave_queue(w, x)
{
    inq[w * N + x] = 0;
    qplace[w * N + x] = 0;
    grtok[w * N + x] = 0;
    grst[w * N + x] = 0
}

/* m_h = the head of node x's queue for caller me (NC: nobody waits): the first waiter whose
 * place deadline has not passed, or me; expired ones in front are dropped with their grant
 * records (QUEUE_HEAD in scripts.c). Any place may have expired since its last attempt. */
inline queue_head(x, me)
{
    do
    :: m_h = NC;
       for (m_k1 : 0 .. NC - 1) {
           if
           :: inq[m_k1 * N + x] && (m_h == NC || qplace[m_k1 * N + x] < qplace[m_h * N + x]) ->
               m_h = m_k1
           :: else -> skip
           fi
       }
       if
       :: m_h == NC || m_h == me -> break
       :: m_h != NC && m_h != me -> break /* its place deadline has not passed */
#ifndef LIVE
       :: m_h != NC && m_h != me -> leave_queue(m_h, x) /* it has */
#endif
       fi
    od
}

/* A fenced yes: the counter before, raised by one in the same step. */
inline fenced_yes(x)
{
    m_f = ctr[x];
    ctr[x]++;
    assert(ctr[x] < 250)
}

/* The queued acquire (ACQUIRE_QUEUED_SOURCE; fenced, rule 5 of the grant design): renew a key
 * that holds the token, or SET NX for the head (or anyone when nobody waits); else join the
 * queue at the waiter's place, refresh its deadline and leave a grant record. */
inline script_acquire(c, x, tk, stamp)
{
    look_key(x);
    queue_head(x, c);
    m_f = 0;
    if
    :: ktok[x] == tk || (ktok[x] == 0 && (m_h == NC || m_h == c)) ->
        ghost_join(c, x, tk);
        ktok[x] = tk;
        kbind[x] = BIND(c, tk, stamp);
        if :: fenced[c] -> fenced_yes(x) :: else -> skip fi;
        m_v = VY
    :: else ->
        if
        :: !inq[c * N + x] -> inq[c * N + x] = 1; qplace[c * N + x] = place[c]
        :: else -> skip
        fi;
        grtok[c * N + x] = tk;
        grst[c * N + x] = stamp;
        m_v = VN
    fi
}

/* The commit: counter = max(counter, F) where the key holds the token. */
inline script_commit(x, tk, F)
{
    look_key(x);
    if
    :: ktok[x] == tk ->
        if :: ctr[x] < F -> ctr[x] = F :: else -> skip fi;
        m_v = VY
    :: else -> m_v = VN
    fi
}

/* Extend: pexpire where the key holds the token; with retake (bit 0 of arg), set it where it is
 * gone and raise the counter to the fence (arg >> 1). Under LIBFIX the retake's answer tells a
 * key set anew (2, VR) from one renewed (1). */
inline script_extend(c, x, tk, arg)
{
    look_key(x);
    if
    :: ktok[x] == tk -> kbind[x] = BIND(c, tk, XS); m_v = VY
    :: ktok[x] == 0 && (arg & 1) ->
        ghost_join(c, x, tk);
        ktok[x] = tk;
        kbind[x] = BIND(c, tk, XS);
        if :: (arg >> 1) > ctr[x] -> ctr[x] = (arg >> 1) :: else -> skip fi;
        if :: LIBFIX -> m_v = VR :: else -> m_v = VY fi
    :: else -> m_v = VN
    fi
}

/* Publish a grant on waiter w's own channel at node x; nobody hears it on a half-open
 * connection. Node 0 is also heard on a second subscriber connection (a server listed twice, a
 * cluster's propagation). */
inline publish_grant(w, x, gt, gs, gc, gf)
{
    if
    :: !deaf[w * N + x] ->
        assert(nfull(gch[w * N + x]));
        gch[w * N + x]!gt, gs, gc, gf, x;
        if
        :: x == 0 -> assert(nfull(gdup[w])); gdup[w]!gt, gs, gc, gf, x
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* Release (RELEASE_QUEUED_SOURCE, rule 2 of the grant design): the waiter's grant record goes,
 * and it leaves the queue when it is done; compare-and-delete; then a holder's release hands the
 * key to the queue's head if the head listens and has a grant record: SET with px = min(ttl, its
 * place deadline) - the full ttl, so the key outlives the deadline of the attempt the record
 * names, or capped, a key that may expire any time - for a fenced waiter the counter read and
 * raised, and the grant published. A lost attempt's release wakes nobody (rule 7). */
inline script_release(c, x, tk, kind)
{
    look_key(x);
    if
    :: kind == K_REL || kind == K_LEAVE -> leave_queue(c, x)
    :: else -> grtok[c * N + x] = 0; grst[c * N + x] = 0
    fi;
    if
    :: ktok[x] == tk ->
        ktok[x] = 0;
        kbind[x] = 0;
        m_v = VY;
        if
        :: kind == K_REL ->
            queue_head(x, NC);
            if
            :: m_h != NC && listen[m_h * N + x] && grtok[m_h * N + x] != 0 ->
                m_s = grtok[m_h * N + x];
                ghost_join(m_h, x, m_s);
                ktok[x] = m_s;
                if
                :: m_t = 0; kbind[x] = BIND(m_h, m_s, grst[m_h * N + x])
#ifndef LIVE
                :: m_t = 1; kbind[x] = 0 /* capped: the place deadline was near */
#endif
                fi;
                /* A fenced waiter's grant reads and raises the counter (its attempt says it is
                 * fenced; the model reads that from its client). */
                m_f = 0;
                if :: fenced[m_h] -> fenced_yes(x) :: else -> skip fi;
                publish_grant(m_h, x, m_s, grst[m_h * N + x], m_t, m_f);
                grtok[m_h * N + x] = 0;
                grst[m_h * N + x] = 0
            :: else -> skip /* a wake-up: a hint; the waiter's retry stands for it */
            fi
        :: else -> skip
        fi
    :: else -> m_v = VN
    fi
}

/* ---- the client ----------------------------------------------------------------------------- */

/* Client c leaves its token: its deadlines are forgotten, and the keys still bound to them may
 * expire at any time (they are released, or nobody counts on them). */
inline forget_deadlines(c)
{
    for (m_k2 : 0 .. N - 1) {
        if
        :: kbind[m_k2] > c * NS && kbind[m_k2] <= (c + 1) * NS -> kbind[m_k2] = 0
        :: else -> skip
        fi
    }
    for (m_k2 : 0 .. NS - 1) { DL(c, m_k2) = 0 }
    rslot[c] = 0;
    hslot[c] = 0
}

/* Every attempt whose release may be sent has a token of its own. */
inline new_token(c)
{
    forget_deadlines(c);
    hsent[c] = 0;
    hst[c] = 0;
    ntok[c]++;
    assert(ntok[c] < 16);
    tok[c] = c * 16 + ntok[c];
    att[c] = 0
}

inline clear_grants(c)
{
    gmask[c] = 0;
    gnode[c] = 0;
    gcap[c] = 0;
    gold[c] = 0;
    for (m_k2 : 0 .. N - 1) { gcnt[c * N + m_k2] = 0 }
}

inline popcount(m, out)
{
    out = 0;
    for (m_k2 : 0 .. N) {
        if :: (m >> m_k2) & 1 -> out++ :: else -> skip fi
    }
}

/* The round is over: nothing of it is kept. */
inline end_round(c)
{
    for (m_k2 : 0 .. N - 1) {
        vote[c * N + m_k2] = 0;
        cnt[c * N + m_k2] = 0;
        stale[c * N + m_k2] = 0
    }
    nyes[c] = 0;
    nno[c] = 0;
    nerr[c] = 0;
    nto[c] = 0;
    maxc[c] = 0;
    rk[c] = 0;
    rslot[c] = 0
}

/* A new round: what is on the wire already belongs to earlier ones. */
inline begin_round(c, kind)
{
    end_round(c);
    chg[c] = 0;
    for (m_k2 : 0 .. N - 1) { stale[c * N + m_k2] = len(rq[c * N + m_k2]) }
    rk[c] = kind;
    cs[c] = RUN
}

/* ---- LIBFIX: the continuity rule of issue 39 (see keptm above) ---- */

inline clear_heard(c)
{
    hrd[c] = 0;
    for (m_i : 0 .. N - 1) { bfr[c * N + m_i] = 0 }
}

/* A yes made a node fresh: fresh_since is now. What is on the wire now was sent before it. */
inline fresh_event(c)
{
    hrd[c] = 0;
    for (m_i : 0 .. N - 1) { bfr[c * N + m_i] = len(rq[c * N + m_i]) }
}

/* Node x of client c answered (a real reply, yes or no) a request sent after the last fresh
 * event: heard (only while some node is fresh: else nothing reads it). */
inline heard(c, x)
{
    if :: LIBFIX && m_af && freshm[c] != 0 -> hrd[c] = hrd[c] | (1 << x) :: else -> skip fi
}

/* Node x holds client c's token by a yes that vouches for no earlier moment: it joins F (under
 * BROKEN_KEPTSIZE: K, none is fresh). */
inline join_fresh(c, x)
{
    if
    :: BROKEN(B_KEPTSIZE) -> keptm[c] = keptm[c] | (1 << x)
    :: else ->
        freshm[c] = freshm[c] | (1 << x);
        fresh_event(c);
        printf("NOTE client %d: node %d fresh (F=%d), a fresh event\n", c, x, freshm[c])
    fi
}

/* Node x leaves K (and P); m_lv: it was in K. */
inline kept_left(c, x)
{
    m_lv = (keptm[c] >> x) & 1;
    keptm[c] = keptm[c] & ~(1 << x);
    pendm[c] = pendm[c] & ~(1 << x)
}

inline fresh_left(c, x)
{
    freshm[c] = freshm[c] & ~(1 << x);
    if :: freshm[c] == 0 -> clear_heard(c) :: else -> skip fi
}

/* Rule 3: F joins K once a quorum of K \ P were heard after fresh_since (under
 * BROKEN_LATEKEPT: at once). */
inline promote(c)
{
    if
    :: freshm[c] != 0 ->
        popcount((hrd[c] & keptm[c] & ~pendm[c]), m_n1);
        if
        :: m_n1 >= Q || BROKEN(B_LATEKEPT) ->
            keptm[c] = keptm[c] | freshm[c];
            printf("NOTE client %d: promotion, heard %d, K=%d\n", c, hrd[c], keptm[c]);
            freshm[c] = 0;
            clear_heard(c)
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* Rule 5, after a node left K: the nodes that hold the token as far as client c knows, |K \ P|
 * and, while pending_until has not passed (under BROKEN_PASTDUE: always), |K & P|; fewer than a
 * quorum: the hold had a gap, lost at once (under BROKEN_RETAKE a retake is still sent). A lock
 * not found lost counts a quorum of nodes that do hold its token (or came back as new servers it
 * has not heard of yet), while its validity lasts: the nodes it counts keep their keys till the
 * deadlines they are bound to, unless they restart. */
inline loss_check(c)
{
    promote(c);
    if
    :: !lostk[c] && (cs[c] == HOLD || (cs[c] == RUN && rk[c] == K_EXT)) ->
        popcount((keptm[c] & ~pendm[c]), m_n1);
        m_pk = 0;
        if
        :: m_n1 < Q && pslot[c] != 0 ->
            popcount((keptm[c] & pendm[c]), m_n2);
            if
            :: m_n1 + m_n2 >= Q && BROKEN(B_PASTDUE) -> m_pk = 1
            :: m_n1 + m_n2 >= Q && !BROKEN(B_PASTDUE) ->
                look_deadline(c, pslot[c] - 1);
                m_pk = (DL(c, pslot[c] - 1) == RUNNING)
            :: else -> skip
            fi;
            if :: m_pk -> m_n1 = m_n1 + m_n2 :: else -> skip fi
        :: else -> skip
        fi;
        if
        :: m_n1 < Q ->
            printf("NOTE client %d: loss check K=%d P=%d: lost\n", c, keptm[c], pendm[c]);
            lostk[c] = 1;
            if :: !BROKEN(B_RETAKE) -> lapsed[c] = 1 :: else -> skip fi
        :: m_n1 >= Q && DL(c, hslot[c] - 1) == RUNNING ->
            m_held = 0;
            for (m_i : 0 .. N - 1) {
                if
                :: (keptm[c] >> m_i) & 1 && (m_pk || !((pendm[c] >> m_i) & 1)) &&
                   (ktok[m_i] == tok[c] || newsrv[c * N + m_i] || HOSTILE(m_i)) -> m_held++
                :: else -> skip
                fi
            }
            printf("NOTE client %d: loss check K=%d P=%d (pending counted %d): not lost\n", c,
                   keptm[c], pendm[c], m_pk);
            /* a lock not found lost is held by a quorum */
            assert(m_held >= Q)
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* Rule 2: node x's answer v to an extend of client c's lock (rt: with retake; lw: a late
 * answer to the last won extend). */
inline ext_answer(c, x, v, rt, lw)
{
    m_v2 = v;
    if :: m_v2 == VR && BROKEN(B_RECREATED | B_KEPTSIZE) -> m_v2 = VY :: else -> skip fi;
    if
    :: m_v2 == VY && (keptm[c] >> x) & 1 ->
        if :: lw -> pendm[c] = pendm[c] & ~(1 << x) :: else -> skip fi
    :: m_v2 == VY && !((keptm[c] >> x) & 1) -> join_fresh(c, x)
    :: m_v2 == VR || m_v2 == VN || ((m_v2 == VE || m_v2 == VT) && rt) ->
        kept_left(c, x);
        if :: m_v2 == VR -> join_fresh(c, x) :: else -> fresh_left(c, x) fi;
        if :: m_lv -> loss_check(c) :: else -> skip fi
    :: else -> skip
    fi
}

/* What the reply or event at hand said for rule 1 or 2, acted on once the event is recorded (one
 * place per process: the rule's code is not copied into every inline that records a vote). */
inline rule_answer(c)
{
    if
    :: m_ax != 0 && m_ak == K_EXT -> ext_answer(c, m_ax - 1, m_av, m_art, m_alw)
    :: m_ax != 0 && m_ak != K_EXT -> join_fresh(c, m_ax - 1) /* a late yes to the acquire */
    :: else -> skip
    fi;
    m_ax = 0; m_av = 0; m_ak = 0; m_art = 0; m_alw = 0
}

/* The request of client c's round in flight to node x timed out: it stays on the wire (the
 * last there) and runs later, but its reply will not be read - marked in its kind (+ 8). */
inline mark_timed_out(c, x)
{
    if
    :: len(rq[c * N + x]) > stale[c * N + x] ->
        m_w = len(rq[c * N + x]);
        do
        :: m_w > 0 ->
            rq[c * N + x]?m_q1, m_q2, m_q3;
            if :: m_w == 1 -> m_q1 = m_q1 | 8 :: else -> skip fi;
            rq[c * N + x]!m_q1, m_q2, m_q3;
            m_w--
        :: else -> break
        od;
        m_q1 = 0; m_q2 = 0; m_q3 = 0
    :: else -> skip
    fi
}

inline record_vote(c, x, vt, cr)
{
    vote[c * N + x] = vt;
    if
    :: vt == VR -> nyes[c]++ /* a yes for the round: the key is set */
    :: vt == VY ->
        nyes[c]++;
        if
        :: rk[c] == K_ACQ && fenced[c] ->
            cnt[c * N + x] = cr;
            if :: cr > maxc[c] -> maxc[c] = cr :: else -> skip fi
        :: else -> skip
        fi
    :: vt == VN ->
        nno[c]++;
        /* a node that says no has not kept the token */
        if
        :: track && rk[c] == K_EXT && OLDLIB -> node_forgot(c, x)
        :: track && rk[c] == K_EXT && !LIBRULE && (keptm[c] >> x) & 1 ->
            keptm[c] = keptm[c] & ~(1 << x);
            lost_if_few(c)
        :: else -> skip
        fi
    :: vt == VE -> nerr[c]++
    :: vt == VT -> nto[c]++
    fi;
    if
    :: LIBFIX && rk[c] == K_EXT -> m_ax = x + 1; m_av = vt; m_ak = K_EXT; m_art = retake[c]; m_alw = 0
    :: else -> skip
    fi
}

/* Client c's command connection to node x drops: what was written there and not run yet is
 * lost. A client waiting for a vote from x hears of it later (Conn), and reconnects then; any
 * other reconnects at once (its next request would wait for the reconnect, in order). */
inline flush_rq(c, x)
{
    stale[c * N + x] = 0;
    wpend[c] = wpend[c] & ~(1 << x);
    bfr[c * N + x] = 0;
    wq[c * N + x] = 0;
    do
    :: nempty(rq[c * N + x]) -> rq[c * N + x]?_, _, _
    :: empty(rq[c * N + x]) -> break
    od
}

inline drop_conn(c, x)
{
    flush_rq(c, x);
    if
    :: cs[c] == RUN && vote[c * N + x] == 0 -> cup[c * N + x] = 0
    :: else -> skip
    fi
}

inline flush_sub(c, x)
{
    do
    :: nempty(gch[c * N + x]) -> gch[c * N + x]?_, _, _, _, _
    :: empty(gch[c * N + x]) -> break
    od;
    if
    :: x == 0 ->
        do
        :: nempty(gdup[c]) -> gdup[c]?_, _, _, _, _
        :: empty(gdup[c]) -> break
        od
    :: else -> skip
    fi
}

/* Client c no longer knows a quorum to have kept its token: the hold is lost (under
 * BROKEN_RETAKE, until a retake wins). */
inline lost_if_few(c)
{
    popcount(keptm[c], m_z2);
    if :: m_z2 < Q -> lostk[c] = 1 :: else -> skip fi
}

/* BROKEN_LIBRULE: a won round of client c whose counted yes voters are y (lock.c redlock__lock_kept_yes): when
 * every kept node said yes, y is the kept set and none is fresh; else y joins it, the nodes it
 * adds fresh (under BROKEN_KEPTSIZE, none is). */
inline kept_yes(c, y)
{
    if
    :: (y & keptm[c]) == keptm[c] -> keptm[c] = y; freshm[c] = 0
    :: (y & keptm[c]) != keptm[c] ->
        if :: !BROKEN(B_KEPTSIZE) -> freshm[c] = freshm[c] | (y & ~keptm[c]) :: else -> skip fi;
        keptm[c] = keptm[c] | y
    fi
}

/* BROKEN_LIBRULE: node x no longer keeps client c's token (recheck.c node_forgot): it leaves the kept nodes, and
 * a lock still held (its validity not passed) left with fewer than a quorum of kept nodes that
 * are not fresh had a gap: lost, and no retake from then on (under BROKEN_RETAKE, a retake is
 * still sent, and a won one makes the hold continuous again). */
inline node_forgot(c, x)
{
    if
    :: (keptm[c] >> x) & 1 ->
        keptm[c] = keptm[c] & ~(1 << x);
        freshm[c] = freshm[c] & ~(1 << x);
        popcount((keptm[c] & ~freshm[c]), m_z2);
        if
        :: m_z2 < Q && (cs[c] == HOLD || (cs[c] == RUN && rk[c] == K_EXT)) &&
           DL(c, hslot[c] - 1) != PASSED ->
            lostk[c] = 1;
            if :: !BROKEN(B_RETAKE) -> lapsed[c] = 1 :: else -> skip fi
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* Client c hears (its reconnect's handshake) that node x is a new server. LIBFIX: the promotion
 * is checked with x's old server heard (rule 3), then x leaves K and F, then the loss check. */
inline on_new_server(c, x)
{
    if
    :: LIBFIX ->
        chg[c] = chg[c] | (1 << x);
        if
        :: ((keptm[c] | freshm[c]) >> x) & 1 ->
            promote(c);
            kept_left(c, x);
            fresh_left(c, x);
            hrd[c] = hrd[c] & ~(1 << x);
            if :: m_lv -> loss_check(c) :: else -> skip fi
        :: else -> hrd[c] = hrd[c] & ~(1 << x)
        fi
    :: OLDLIB ->
        chg[c] = chg[c] | (1 << x);
        chgw[c] = chgw[c] | (1 << x);
        node_forgot(c, x)
    :: !LIBRULE && (keptm[c] >> x) & 1 && (cs[c] == HOLD || (cs[c] == RUN && rk[c] == K_EXT)) ->
        keptm[c] = keptm[c] & ~(1 << x);
        lost_if_few(c)
    :: else -> skip
    fi
}

/* BROKEN_LIBRULE: the round client c just won is the one a late yes may come to (round.c late_yes): the nodes
 * that have not answered it yet (a request timed out has: its reply is not read). */
inline won_last(c, y, k, a)
{
    wyes[c] = y;
    wk[c] = k;
    wa[c] = a;
    chgw[c] = chg[c];
    wpend[c] = 0;
    for (m_z3 : 0 .. N - 1) {
        if :: k != 0 && vote[c * N + m_z3] == 0 -> wpend[c] = wpend[c] | (1 << m_z3) :: else -> skip fi
    }
}

/* BROKEN_LIBRULE: node x's reply (kind k, token tk, argument a, vote m_v) to an earlier round of
 * client c: a yes
 * to its last won round joins the kept nodes with that round's other yes votes, unless the node
 * was heard of as a new server since the round began or the hold had a gap. */
inline late_yes(c, x, k, tk, a)
{
    if
    :: LIBFIX && !m_to && k != K_DROP && k != K_LEAVE ->
        /* LIBFIX: any reply read is heard; a yes to the won acquire (or its commit) joins F
         * (rule 1), an extend's answer is rule 2's */
        heard(c, x);
        if
        :: tk == tok[c] && tk != 0 && k == wk[c] && a == wa[c] && m_v == VY &&
           !((keptm[c] >> x) & 1) -> m_ax = x + 1; m_ak = K_ACQ
        :: tk == tok[c] && tk != 0 && k == K_EXT ->
            m_ax = x + 1; m_av = m_v; m_ak = K_EXT; m_art = a & 1; m_alw = m_lw
        :: else -> skip
        fi
    :: OLDLIB && (wpend[c] >> x) & 1 && k == wk[c] && tk == tok[c] && a == wa[c] ->
        wpend[c] = wpend[c] & ~(1 << x);
        if
        :: m_v == VY && !lostk[c] && !((chgw[c] >> x) & 1) ->
            wyes[c] = (wyes[c] | (1 << x)) & ~chgw[c];
            kept_yes(c, wyes[c])
        :: else -> skip
        fi
    :: else -> skip
    fi
}

/* Write a request to node x, for the round (or, for K_DROP and K_LEAVE, for nobody). A node that
 * is down, or whose connection is full (it stopped answering, and is disconnected), fails at
 * once. */
inline send(c, x, kind, arg)
{
    if
    :: cup[c * N + x] && !newsrv[c * N + x] && len(rq[c * N + x]) < RQCAP ->
        rq[c * N + x]!kind, tok[c], arg
    :: else ->
        if :: cup[c * N + x] -> flush_rq(c, x) :: else -> skip fi;
        if :: kind != K_DROP && kind != K_LEAVE -> record_vote(c, x, VE, 0) :: else -> skip fi
    fi
}

/* Write the round's request to every node that has not voted in it. */
inline send_all(c, kind, arg)
{
    for (m_x1 : 0 .. N - 1) {
        if :: vote[c * N + m_x1] == 0 -> send(c, m_x1, kind, arg) :: else -> skip fi
    }
}

inline start_attempt(c)
{
#ifdef LIVE
    if :: att[c] == MAXATT -> att[c] = MAXATT - 1 :: else -> skip fi; /* no deadline passes */
#endif
    assert(att[c] < MAXATT);
    begin_round(c, K_ACQ);
    DL(c, att[c]) = RUNNING;
    rslot[c] = att[c];
    send_all(c, K_ACQ, att[c]);
    att[c]++;
    m_again = 1
}

/* The fencing commit of a won acquire (commit_start in ops.c) or of a quorum of grants; its
 * validity is the acquire's (deadline s). A node whose yes read F - 1 (a bit of pre) raised its
 * counter to F already: its ack counts at once, and it gets no commit. */
inline start_commit(c, F, pre, s)
{
    /* F, pre and s may read the acquire round's own state (maxc, rslot), which begin_round
     * clears: they are read first. */
    m_cf = F;
    m_cp = pre;
    m_cs = s;
    fence[c] = m_cf;
    begin_round(c, K_COMMIT);
    rslot[c] = m_cs;
    for (m_x2 : 0 .. N - 1) {
        if :: (m_cp >> m_x2) & 1 -> record_vote(c, m_x2, VY, 0) :: else -> skip fi
    }
    if
    :: nyes[c] < FENCE_COMMIT -> send_all(c, K_COMMIT, m_cf)
    :: else -> skip
    fi;
    m_again = 1
}

/* Every client that holds a lock still valid has its key on a quorum of nodes, each bound to a
 * deadline that cannot pass before the hold's (a node that is down counts if it still has it):
 * what validity means, and what mutual exclusion rests on. */
inline check_backed()
{
    for (m_x3 : 0 .. NC - 1) {
        if
        :: hold[m_x3] && DL(m_x3, hslot[m_x3] - 1) == RUNNING && !amnesia ->
            m_b = 0;
            for (m_k1 : 0 .. N - 1) {
                if
                :: HOSTILE(m_k1) -> m_b++
                :: !HOSTILE(m_k1) && ktok[m_k1] == tok[m_x3] &&
                   kbind[m_k1] > m_x3 * NS + hslot[m_x3] - 1 && kbind[m_k1] <= (m_x3 + 1) * NS -> m_b++
                :: else -> skip
                fi
            }
            /* validity backed by a quorum of keys */
            assert(m_b >= Q)
        :: else -> skip
        fi
    }
}

/* The nodes that voted yes in client c's round in flight. */
inline yes_mask(c, out)
{
    out = 0;
    for (m_z3 : 0 .. N - 1) {
        if :: vote[c * N + m_z3] == VY -> out = out | (1 << m_z3) :: else -> skip fi
    }
}

/* The lock is the client's (a won plain acquire, or a won commit): the properties of a grant. */
inline granted(c)
{
    if
    :: fenced[c] ->
        /* fences strictly increase in the real-time order of grants */
        assert(fence[c] > lastfence);
        lastfence = fence[c];
        /* the fence is committed: on the fence_commit nodes (a hostile one may lie, an empty
         * restart since may have lost one) the counter is at least the fence */
        m_z1 = 0;
        for (m_z3 : 0 .. N - 1) {
            if :: !HOSTILE(m_z3) && ctr[m_z3] >= fence[c] -> m_z1++ :: else -> skip fi
        }
        assert(m_z1 + emptied + hostile >= FENCE_COMMIT)
    :: else -> skip
    fi;
    for (m_x2 : 0 .. NC - 1) {
        if
        :: m_x2 != c ->
            /* mutual exclusion, on true time: no other client holds a lock still valid */
            assert(amnesia || !(hold[m_x2] && DL(m_x2, hslot[m_x2] - 1) == RUNNING));
            /* (gapk: only where the kept nodes are tracked; gap says the same elsewhere) */
            if :: hold[m_x2] -> gap[m_x2] = 1; gapk[m_x2] = track :: else -> skip fi
        :: else -> skip
        fi
    }
    /* The nodes that voted yes in the won round (its grants, when it was won by grants), less
     * those heard of as new servers since it began, join the kept nodes. */
    if
    :: !track -> skip
    :: track && !LIBRULE && cs[c] == SLEEP -> keptm[c] = gnode[c]
    :: track && !LIBRULE && cs[c] != SLEEP -> yes_mask(c, keptm[c])
    /* LIBFIX (rule 1): K = the yes votes, F = P = 0; a later yes to the won round joins F */
    :: LIBFIX ->
        if
        :: cs[c] == SLEEP -> keptm[c] = gnode[c] & ~chg[c]; wk[c] = 0; wa[c] = 0
        :: cs[c] != SLEEP ->
            yes_mask(c, m_z1);
            keptm[c] = m_z1 & ~chg[c];
            wk[c] = rk[c];
            if :: rk[c] == K_ACQ -> wa[c] = rslot[c] :: else -> wa[c] = fence[c] fi
        fi;
        freshm[c] = 0;
        pendm[c] = 0;
        pslot[c] = 0;
        clear_heard(c);
        for (m_i : 0 .. N - 1) { wq[c * N + m_i] = 0 }
    :: OLDLIB && cs[c] == SLEEP ->
        m_z1 = gnode[c] & ~chg[c];
        kept_yes(c, m_z1);
        won_last(c, m_z1, 0, 0)
    :: OLDLIB && cs[c] != SLEEP ->
        yes_mask(c, m_z1);
        m_z1 = m_z1 & ~chg[c];
        kept_yes(c, m_z1);
        if
        :: rk[c] == K_ACQ -> won_last(c, m_z1, K_ACQ, rslot[c])
        :: else -> won_last(c, m_z1, K_COMMIT, fence[c])
        fi
    fi;
    lostk[c] = 0;
    gapk[c] = 0;
    hslot[c] = rslot[c] + 1;
    end_round(c);
    clear_grants(c);
    hold[c] = 1;
    check_backed();
    gap[c] = 0;
    lapsed[c] = 0;
    extleft[c] = exts;
    cs[c] = HOLD;
    ghost_check(c); /* the yes votes of old servers, gone since: fewer than a quorum hold it */
#ifdef LIVE
    if :: c == 1 -> won1 = 1 :: else -> skip fi;
#endif
    skip
}

/* The operation is over (given up, or released): back to idle, nothing kept. */
inline op_done(c)
{
    end_round(c);
    clear_grants(c);
    forget_deadlines(c);
    tok[c] = 0;
    att[c] = 0;
    attleft[c] = 0;
    place[c] = 0;
    fenced[c] = 0;
    fence[c] = 0;
    hold[c] = 0;
    gap[c] = 0;
    lapsed[c] = 0;
    late[c] = 0;
    retake[c] = 0;
    extleft[c] = 0;
    keptm[c] = 0;
    freshm[c] = 0;
    pendm[c] = 0;
    pslot[c] = 0;
    clear_heard(c);
    for (m_i : 0 .. N - 1) { wq[c * N + m_i] = 0 }
    lostk[c] = 0;
    chg[c] = 0;
    chgw[c] = 0;
    wyes[c] = 0;
    wpend[c] = 0;
    wk[c] = 0;
    wa[c] = 0;
    gapk[c] = 0;
    cs[c] = IDLE
}

/* grant_win: a quorum of grants for the current token. With the full ttl each: won, with the
 * validity of the oldest attempt they name (fenced: F = 1 + the largest counter, then the
 * commit). Some capped: a claim, an ordinary acquire round (the script renews the keys). */
inline grant_win(c)
{
    if
    :: gcap[c] ->
        clear_grants(c);
        if
        :: att[c] < MAXATT -> start_attempt(c)
        :: else -> end_round(c); cs[c] = SLEEP
        fi
    :: else ->
        if
        :: BROKEN(B_GRANT_START) -> DL(c, GS) = RUNNING; m_d = GS /* a validity that starts now */
        :: else -> m_d = gold[c]
        fi;
        look_deadline(c, m_d);
        if
        :: DL(c, m_d) == RUNNING && fenced[c] ->
            m_a = 0;
            for (m_x3 : 0 .. N - 1) {
                if
                :: (gnode[c] >> m_x3) & 1 && gcnt[c * N + m_x3] >= m_a -> m_a = gcnt[c * N + m_x3] + 1
                :: else -> skip
                fi
            }
            /* A grant's counter is a candidate: every node gets the commit (under
             * BROKEN_PRECOUNT a granting node whose counter + 1 is the fence is taken as
             * committed). */
            m_b = 0;
            for (m_x3 : 0 .. N - 1) {
                if
                :: BROKEN(B_PRECOUNT) && (gnode[c] >> m_x3) & 1 && gcnt[c * N + m_x3] + 1 == m_a ->
                    m_b = m_b | (1 << m_x3)
                :: else -> skip
                fi
            }
            clear_grants(c);
            start_commit(c, m_a, m_b, m_d)
        :: DL(c, m_d) == RUNNING && !fenced[c] -> rslot[c] = m_d; granted(c)
        :: else -> clear_grants(c); end_round(c); cs[c] = SLEEP /* too old: it retries */
        fi
    fi
}

/* lock_attempt_lost: keep the token when nothing can be held (no yes, no timeout) and look at
 * the grants heard meanwhile; else release everywhere, and a new token. */
inline attempt_lost(c, st)
{
    if
    :: RETRY(c) && st == ST_BUSY && rk[c] == K_ACQ && nyes[c] == 0 && nto[c] == 0 ->
        end_round(c);
        cs[c] = SLEEP;
        popcount(gmask[c], m_a);
        if :: m_a >= Q -> grant_win(c) :: else -> skip fi
    :: else ->
        end_round(c);
        clear_grants(c);
        if
        :: RETRY(c) ->
            for (m_x1 : 0 .. N - 1) { send(c, m_x1, K_DROP, 0) }
            new_token(c);
            cs[c] = SLEEP
        :: else ->
            for (m_x1 : 0 .. N - 1) { send(c, m_x1, K_LEAVE, 0) }
            op_done(c)
        fi
    fi
}

/* m_z1 = whether client c's won round (extend or release) shows continuity: a quorum of its yes
 * votes came from nodes known to have kept the token since the last won round (and none of them
 * lost it meanwhile: lostk). Under BROKEN_RETAKE, a won retake proves it. A node that voted yes
 * in the last won round but is silent now may have come back empty unseen: it proves nothing.
 * Under BROKEN_LIBRULE (recheck.c redlock__recheck_votes): the hold had no gap and, for an
 * extend, once its counted yes voters (m_y1) joined the kept nodes, these are a quorum. */
inline continuous(c)
{
    m_z2 = 0;
    m_y1 = 0;
    if
    :: LIBFIX -> skip /* its own decisions: ext_check, rel_check */
    :: OLDLIB && rk[c] == K_EXT ->
        yes_mask(c, m_y1);
        m_y1 = m_y1 & ~chg[c];
        kept_yes(c, m_y1);
        popcount(keptm[c], m_z2)
    :: OLDLIB && rk[c] != K_EXT -> m_z2 = Q
    :: !LIBRULE && track -> yes_mask(c, m_z1); popcount((m_z1 & keptm[c]), m_z2)
    :: !LIBRULE && !track -> skip
    fi;
    if
    :: BROKEN(B_RETAKE) && rk[c] == K_EXT && retake[c] -> m_z1 = 1
    :: !(BROKEN(B_RETAKE) && rk[c] == K_EXT && retake[c]) && LIBRULE -> m_z1 = (!lostk[c] && m_z2 >= Q)
    :: !(BROKEN(B_RETAKE) && rk[c] == K_EXT && retake[c]) && !LIBRULE &&
       BROKEN(B_RETAKE | B_KEPTSIZE) ->
        m_z1 = !lostk[c] /* while a quorum is not known to be lost */
    :: !LIBRULE && !BROKEN(B_RETAKE | B_KEPTSIZE) -> m_z1 = (!lostk[c] && (m_z2 >= Q || !track))
    fi
}

inline release_done(c)
{
    continuous(c);
    if
    :: !late[c] && !lapsed[c] && nyes[c] >= Q && m_z1 ->
        /* the release reports 0: the hold was continuous. No hold is reported continuous across
         * a gap in which fewer than a quorum kept the token, or another client held it. */
        assert(!gapk[c]);
        assert(!gap[c])
    :: else -> skip /* REDLOCK_ELOST or REDLOCK_ENOQUORUM */
    fi;
    op_done(c)
}

inline round_won(c)
{
    if
    :: rk[c] == K_ACQ && fenced[c] ->
        m_b = 0;
        for (m_x3 : 0 .. N - 1) {
            if
            :: vote[c * N + m_x3] == VY && cnt[c * N + m_x3] == maxc[c] -> m_b = m_b | (1 << m_x3)
            :: else -> skip
            fi
        }
        start_commit(c, maxc[c] + 1, m_b, rslot[c])
    :: (rk[c] == K_ACQ && !fenced[c]) || rk[c] == K_COMMIT ->
        /* a yes of a node heard of as a new server since the round began is the old server's:
         * without it, fewer than a quorum may hold the keys (acquire.c: ENOQUORUM) */
        m_z2 = Q;
        if :: LIBRULE -> yes_mask(c, m_z1); popcount((m_z1 & ~chg[c]), m_z2) :: else -> skip fi;
        if
        :: m_z2 >= Q -> granted(c)
        :: else -> round_lost(c, ST_NOQUORUM)
        fi
    :: rk[c] == K_EXT ->
        look_deadline(c, hslot[c] - 1);
        if
        :: DL(c, hslot[c] - 1) == PASSED -> skip /* decided after the deadline: EEXPIRED */
        :: DL(c, hslot[c] - 1) != PASSED && retake[c] && lapsed[c] -> skip /* ELOST */
        :: DL(c, hslot[c] - 1) != PASSED && !(retake[c] && lapsed[c]) ->
            continuous(c);
            if
            :: !m_z1 && OLDLIB -> lapsed[c] = 1 /* ELOST: no retake from now on */
            :: !m_z1 && !LIBRULE -> lostk[c] = 1 /* ELOST: no quorum kept it */
            :: m_z1 ->
                /* won: the hold goes on, continuous (RL_AMNESIA: as far as the client knows
                 * yet; a node heard later to be a new server may still make it lost) */
                assert(amnesia || !gap[c]);
                hslot[c] = XS + 1;
                lapsed[c] = 0;
                lostk[c] = 0;
                if
                :: OLDLIB -> won_last(c, m_y1, K_EXT, retake[c] + 2 * fence[c])
                :: !LIBRULE && track -> yes_mask(c, keptm[c])
                :: else -> skip
                fi
            fi
        fi;
        end_round(c);
        cs[c] = HOLD
    fi
}

inline round_lost(c, st)
{
    if
    :: rk[c] == K_EXT ->
        if :: st == ST_BUSY -> lapsed[c] = 1 :: else -> skip fi;
        end_round(c);
        cs[c] = HOLD
    :: else -> attempt_lost(c, st)
    fi
}

/* LIBFIX: ext_check found a quorum of K renewed in client c's extend (m_rn: the renewals), within
 * its validity: proven, unless decided after the hold's deadline (EEXPIRED). */
inline ext_won(c)
{
    look_deadline(c, hslot[c] - 1);
    if
    :: DL(c, hslot[c] - 1) == PASSED -> skip /* decided after the deadline: EEXPIRED */
    :: DL(c, hslot[c] - 1) != PASSED ->
        assert(amnesia || !gap[c]);
        /* BROKEN_RETAKE: a won retake proves continuity, its yes voters kept anew */
        if
        :: BROKEN(B_RETAKE) && retake[c] ->
            for (m_i : 0 .. N - 1) {
                if
                :: (vote[c * N + m_i] == VY || vote[c * N + m_i] == VR) &&
                   !((chg[c] >> m_i) & 1) -> m_rn = m_rn | (1 << m_i)
                :: else -> skip
                fi
            }
            keptm[c] = m_rn;
            freshm[c] = 0;
            clear_heard(c)
        :: else -> skip
        fi;
        /* rule 4: the pending nodes that did not renew leave K; P = K less the renewed */
        keptm[c] = keptm[c] & ~(pendm[c] & ~m_rn);
        pendm[c] = keptm[c] & ~m_rn;
        pslot[c] = hslot[c];
        hslot[c] = XS + 1;
        lapsed[c] = 0;
        lostk[c] = 0;
        printf("NOTE client %d: extend proven, renewed %d, K=%d P=%d\n", c, m_rn, keptm[c],
               pendm[c]);
        /* where the answer to this extend is still on the wire: the last request there */
        for (m_i : 0 .. N - 1) {
            if
            :: vote[c * N + m_i] == 0 && len(rq[c * N + m_i]) > stale[c * N + m_i] ->
                wq[c * N + m_i] = len(rq[c * N + m_i])
            :: else -> wq[c * N + m_i] = 0
            fi
        }
    fi;
    end_round(c);
    cs[c] = HOLD
}

/* LIBFIX, rule 4: an extend is continuous once a quorum of K renewed (1) in it, ELOST once that
 * is out of reach or the lock was found lost (under BROKEN_RETAKE, a retake is won by any
 * quorum of yes votes, whatever was lost). The promotion is checked first. */
inline ext_check(c)
{
    promote(c);
    m_rn = 0;
    m_n2 = 0;
    for (m_i : 0 .. N - 1) {
        if
        :: vote[c * N + m_i] == VY && !((chg[c] >> m_i) & 1) -> m_rn = m_rn | (1 << m_i)
        :: vote[c * N + m_i] == 0 && (keptm[c] >> m_i) & 1 -> m_n2++
        :: else -> skip
        fi
    }
    if
    :: BROKEN(B_RETAKE) && retake[c] ->
        m_n1 = nyes[c];
        m_n2 = N - nyes[c] - nno[c] - nerr[c] - nto[c];
        m_w = 0
    :: else -> popcount((m_rn & keptm[c]), m_n1); m_w = lostk[c]
    fi;
    if
    :: !m_w && m_n1 >= Q ->
        look_deadline(c, rslot[c]);
        if
        :: DL(c, rslot[c]) == RUNNING -> ext_won(c)
        :: else -> end_round(c); cs[c] = HOLD /* no validity left (EEXPIRED) */
        fi
    :: m_w || (m_n1 < Q && m_n1 + m_n2 < Q) ->
        printf("NOTE client %d: extend ELOST (lost %d)\n", c, m_w);
        lapsed[c] = 1; end_round(c); cs[c] = HOLD /* ELOST: no retake from now on */
    :: else -> skip
    fi
}

/* LIBFIX, rule 4: a release reports 0 (continuous) once a quorum of K said yes, ELOST once that
 * is out of reach (or the lock was lost, or released late). The promotion is checked first. */
inline rel_check(c)
{
    promote(c);
    m_rn = 0;
    m_n2 = 0;
    for (m_i : 0 .. N - 1) {
        if
        :: vote[c * N + m_i] == VY && !((chg[c] >> m_i) & 1) -> m_rn = m_rn | (1 << m_i)
        :: vote[c * N + m_i] == 0 && (keptm[c] >> m_i) & 1 -> m_n2++
        :: else -> skip
        fi
    }
    popcount((m_rn & keptm[c]), m_n1);
    m_w = 1; /* decided */
    if
    :: late[c] || lapsed[c] || lostk[c] ->
        printf("NOTE client %d: release ELOST (or late)\n", c) /* REDLOCK_ELOST, EEXPIRED */
    :: !(late[c] || lapsed[c] || lostk[c]) && m_n1 >= Q ->
        /* the release reports 0: the hold was continuous. No hold is reported continuous across
         * a gap in which fewer than a quorum kept the token, or another client held it. */
        printf("NOTE client %d: release reports continuous, K=%d yes=%d\n", c, keptm[c], m_rn);
        assert(!gapk[c]);
        assert(!gap[c])
    :: !(late[c] || lapsed[c] || lostk[c]) && m_n1 < Q && m_n1 + m_n2 < Q ->
        printf("NOTE client %d: release ELOST (out of reach)\n", c)
    :: else -> m_w = 0
    fi;
    if :: m_w -> m_w = 0; op_done(c) :: else -> skip fi
}

/* The round's decision (quorum.c: decide), and what the operation does with it. */
inline round_check(c)
{
    if
    :: cs[c] != RUN -> skip
    :: cs[c] == RUN && rk[c] == K_REL && LIBFIX -> rel_check(c)
    :: cs[c] == RUN && rk[c] == K_EXT && LIBFIX -> ext_check(c)
    :: cs[c] == RUN && rk[c] == K_REL && !LIBFIX ->
        if :: nyes[c] + nno[c] + nerr[c] + nto[c] == N -> release_done(c) :: else -> skip fi
    :: cs[c] == RUN && rk[c] != K_REL && !(rk[c] == K_EXT && LIBFIX) ->
        if :: rk[c] == K_COMMIT -> m_t = FENCE_COMMIT :: else -> m_t = Q fi;
        if
        :: nyes[c] >= m_t ->
            look_deadline(c, rslot[c]);
            if
            :: DL(c, rslot[c]) == RUNNING -> round_won(c)
            :: else -> round_lost(c, ST_EXPIRED) /* no validity left */
            fi
        :: nyes[c] < m_t && nno[c] + nerr[c] + nto[c] > N - m_t ->
            if
            :: nno[c] >= nerr[c] + nto[c] -> round_lost(c, ST_BUSY)
            :: else -> round_lost(c, ST_NOQUORUM)
            fi
        :: else -> skip
        fi
    fi
}

/* Decide the client's round and act on it until nothing is left to decide: acting may start a
 * round that is decided at once (an inline cannot call itself). */
inline settle(c)
{
    do
    :: m_again -> m_again = 0; round_check(c)
    :: else -> break
    od
}

/* A grant heard on subscriber connection gconn (N: node 0's second one), from node gx. */
/* It counts for the node whose subscriber delivered it, and only when its tag names that node
 * (under BROKEN_TAG: for the node its tag names). */
inline on_grant(c, gconn, gx, gt, gs, gc, gf, gtag)
{
    if :: BROKEN(B_TAG) -> m_g = gtag :: else -> m_g = gx fi;
    if
    :: gt == tok[c] && gt != 0 && ((cs[c] == RUN && rk[c] == K_ACQ) || cs[c] == SLEEP) &&
       m_g == gtag && m_g < N ->
        if :: gmask[c] == 0 || gs < gold[c] -> gold[c] = gs :: else -> skip fi;
        if
        :: BROKEN(B_SUBSCRIBER) -> gmask[c] = gmask[c] | (1 << gconn)
        :: else -> gmask[c] = gmask[c] | (1 << m_g)
        fi;
        gnode[c] = gnode[c] | (1 << m_g);
        gcnt[c * N + m_g] = gf;
        gcap[c] = gcap[c] | gc;
        if
        :: cs[c] == SLEEP ->
            popcount(gmask[c], m_a);
            if :: m_a >= Q -> grant_win(c) :: else -> skip fi
        :: else -> skip /* decided with the attempt in flight (attempt_lost) */
        fi
    :: else -> skip
    fi
}

/* ---- processes ------------------------------------------------------------------------------ */

/* Connection c * N + x, with what travels on it and what may go wrong with it. */
proctype Conn(byte c; byte x)
{
    byte kind, tk, arg, g, tg;
end:
    do
    /* (First: a depth-first search meets the forgeries early.) The hostile node publishes a grant of its own on client c's channel: the current token
     * and stamp it was sent, any counter and tag. (A grant with another token, or before the
     * client waits, is ignored; sent later it is the same.) */
    :: atomic {
        HOSTILE(x) && forge > 0 && hsent[c] && listen[c * N + x] && !deaf[c * N + x] &&
        nfull(gch[c * N + x]) && (cs[c] == SLEEP || (cs[c] == RUN && rk[c] == K_ACQ)) ->
        forge--;
        arg = hst[c];
        if :: kind = 0 :: fenced[c] -> kind = 100 fi;
        if :: tg = 0 :: tg = 1 :: tg = 2 :: N > 3 && tg < N -> tg = N - 1 fi;
        gch[c * N + x]!tok[c], arg, 0, kind, tg;
        kind = 0; arg = 0; tg = 0
       }
    /* One event (the node runs a request and its reply comes back; a grant is heard; the client
     * hears that the connection dropped or a request timed out), then client c's round is
     * settled. */
    :: atomic {
        ((up[x] && len(rq[c * N + x]) > 0) || len(gch[c * N + x]) > 0 ||
         (x == 0 && len(gdup[c]) > 0) ||
         (cs[c] == RUN && vote[c * N + x] == 0 && (!cup[c * N + x] || MAY(F_TIMEOUT)))) ->
        if
        :: up[x] && len(rq[c * N + x]) > 0 ->
            rq[c * N + x]?kind, tk, arg;
            m_f = 0;
            /* LIBFIX: a request that timed out (its reply unread), one sent before the last
             * fresh event, the last won extend's */
            m_to = 0;
            m_af = 1;
            m_lw = 0;
            if
            :: LIBFIX ->
                m_to = kind >> 3;
                kind = kind & 7;
                if :: bfr[c * N + x] > 0 -> bfr[c * N + x]--; m_af = 0 :: else -> skip fi;
                if
                :: wq[c * N + x] > 0 -> m_lw = (wq[c * N + x] == 1); wq[c * N + x]--
                :: else -> skip
                fi
            :: else -> skip
            fi;
            if
            :: HOSTILE(x) ->
                /* it runs nothing, and answers anything (a fenced acquire: any counter) */
                if
                :: kind == K_ACQ && tk == tok[c] -> hsent[c] = 1; hst[c] = arg
                :: else -> skip
                fi;
                if :: m_v = VN :: m_v = VY fi; /* an error is a fault's, a no's cost */
                if :: kind == K_ACQ && fenced[c] -> if :: m_f = 0 :: m_f = 100 fi :: else -> skip fi
            :: !HOSTILE(x) && kind == K_ACQ -> script_acquire(c, x, tk, arg)
            :: !HOSTILE(x) && kind == K_COMMIT -> script_commit(x, tk, arg)
            :: !HOSTILE(x) && kind == K_EXT -> script_extend(c, x, tk, arg)
            :: !HOSTILE(x) && kind == K_REL || kind == K_DROP || kind == K_LEAVE -> script_release(c, x, tk, kind)
            fi;
            check_backed();
            printf("NOTE node %d ran kind %d (token %d, arg %d) of client %d: answer %d (unread %d)\n",
                   x, kind, tk, arg, c, m_v, m_to);
            if
            :: cs[c] == RUN && stale[c * N + x] > 0 ->
                stale[c * N + x]--; /* an earlier round's */
                late_yes(c, x, kind, tk, arg)
            :: cs[c] == RUN && stale[c * N + x] == 0 && kind != K_DROP && kind != K_LEAVE &&
               vote[c * N + x] == 0 ->
                if
                :: heard(c, x); record_vote(c, x, m_v, m_f); m_again = 1
                :: MAY(F_LOST) ->
                    printf("NOTE client %d: that reply of node %d is lost\n", c, x);
                    faults--; flush_rq(c, x); cup[c * N + x] = 0 /* the reply lost */
                fi
            :: else -> late_yes(c, x, kind, tk, arg) /* nobody waits for this reply */
            fi
        :: len(gch[c * N + x]) > 0 ->
            gch[c * N + x]?tk, arg, g, kind, tg;
            on_grant(c, x, x, tk, arg, g, kind, tg)
        :: x == 0 && len(gdup[c]) > 0 ->
            gdup[c]?tk, arg, g, kind, tg;
            on_grant(c, N, 0, tk, arg, g, kind, tg)
        :: cs[c] == RUN && vote[c * N + x] == 0 && !cup[c * N + x] ->
            printf("NOTE client %d: node %d errs (its connection dropped)\n", c, x);
            record_vote(c, x, VE, 0); /* the connection dropped */
            cup[c * N + x] = up[x]; /* reconnected, if the node is up */
            m_again = 1
        :: cs[c] == RUN && vote[c * N + x] == 0 && MAY(F_TIMEOUT) ->
            faults--;
            printf("NOTE client %d: its request to node %d times out\n", c, x);
            if :: LIBFIX -> mark_timed_out(c, x) :: else -> skip fi;
            record_vote(c, x, VT, 0); /* timed out: the request stays on the wire */
            m_again = 1
        fi;
        rule_answer(c);
        settle(c);
        kind = 0; tk = 0; arg = 0; g = 0; tg = 0; m_to = 0; m_af = 0; m_lw = 0
       }
    /* The reconnect's handshake shows a new server (its run_id). */
    :: atomic {
        newsrv[c * N + x] && up[x] ->
        newsrv[c * N + x] = 0;
        printf("NOTE client %d hears node %d is a new server\n", c, x);
        on_new_server(c, x)
       }
    :: atomic { up[x] && (!listen[c * N + x] || deaf[c * N + x]) -> listen[c * N + x] = 1; deaf[c * N + x] = 0 }
    :: atomic {
        MAY(F_DROP) && up[x] && cup[c * N + x] ->
        printf("NOTE client %d: its connection to node %d drops\n", c, x);
        faults--;
        drop_conn(c, x)
       }
    :: atomic { MAY(F_UNSUB) && listen[c * N + x] -> faults--; listen[c * N + x] = 0; flush_sub(c, x) }
    :: atomic {
        MAY(F_DEAF) && listen[c * N + x] && !deaf[c * N + x] ->
        faults--;
        flush_sub(c, x);
        deaf[c * N + x] = 1 /* the node still counts the subscriber */
       }
    od
}

/* Node x is back: its clients reconnect and subscribe again (one still to hear that its
 * connection dropped, when it does). */
inline restart(x)
{
    up[x] = 1;
    for (m_k2 : 0 .. NC - 1) {
        /* RL_AMNESIA: a client that holds hears of the new server on its reconnect (one that
         * holds nothing has nothing to learn from it; under the kept-and-fresh rules, one that
         * acquires or waits has: a yes its node gave before is the old server's) */
        newsrv[m_k2 * N + x] = amnesia && (cs[m_k2] == HOLD || (cs[m_k2] == RUN && rk[m_k2] != K_ACQ) ||
                                           (LIBRULE && cs[m_k2] != IDLE));
        listen[m_k2 * N + x] = 1;
        cup[m_k2 * N + x] = !(cs[m_k2] == RUN && vote[m_k2 * N + x] == 0)
    }
}

/* Node x comes back empty - keys, counter, queue and grant records gone - after its key expired
 * (it stayed away longer than the longest ttl); under RL_AMNESIA at once. */
inline empty_restart(x)
{
    if
    :: kbind[x] != 0 && !BROKEN(B_NO_DELAY) && !amnesia ->
        m_y1 = (kbind[x] - 1) / NS;
        m_y2 = (kbind[x] - 1) % NS;
        pass_upto(m_y1, m_y2)
    :: else -> skip
    fi;
    printf("NOTE node %d restarts empty\n", x);
    empties--;
    emptied++;
    ktok[x] = 0;
    kbind[x] = 0;
    ctr[x] = 0;
    for (m_y1 : 0 .. NC - 1) { leave_queue(m_y1, x) }
    ghost_kept(x);
    check_backed();
    restart(x)
}

/* Node x crashes (its connections drop) and restarts with its data, or empty - keys, counter,
 * queue and grant records gone - after its key expired (it stayed away longer than the longest
 * ttl). */
proctype Node(byte x)
{
    byte c;
end:
    do
    :: atomic {
        MAY(F_CRASH) && up[x] && !(amnesia && x == 0) -> /* RL_AMNESIA: 1 and 2 (symmetry) */
        printf("NOTE node %d crashes\n", x);
        faults--;
        up[x] = 0;
        for (c : 0 .. NC - 1) {
            flush_rq(c, x);
            cup[c * N + x] = 0;
            flush_sub(c, x);
            listen[c * N + x] = 0;
            deaf[c * N + x] = 0
        }
        c = 0;
        if :: amnesia && empties > 0 -> empty_restart(x) :: else -> skip fi /* at once */
       }
    :: atomic { !up[x] && !amnesia -> restart(x) }
    :: atomic { !up[x] && empties > 0 && !amnesia -> empty_restart(x) }
    od
}

/* Client c: its operations, one at a time. */
proctype Client(byte c)
{
end:
    do
    :: atomic {
        ((cs[c] == IDLE && opsleft[c] > 0) || (cs[c] == SLEEP && RETRY_NOW(c)) ||
         (cs[c] == HOLD && HOLD_ENDS(c))) ->
        if
        :: cs[c] == IDLE ->
            opsleft[c]--;
            nextplace++;
            place[c] = nextplace;
            if
            :: c == 0 && fen0 != 1 || c == 1 && fen1 != 1 -> fenced[c] = 0
            :: c == 0 && fen0 != 0 || c == 1 && fen1 != 0 -> fenced[c] = 1
            fi;
            new_token(c);
            if :: c == 0 -> attleft[c] = att0 - 1 :: else -> attleft[c] = att1 - 1 fi;
            start_attempt(c)
        :: cs[c] == SLEEP ->
            if :: attleft[c] > 0 -> attleft[c]-- :: else -> skip fi;
            start_attempt(c)
        :: cs[c] == HOLD && extleft[c] > 0 ->
            extleft[c]--;
            if :: retake[c] = 0 :: !lapsed[c] -> retake[c] = 1 fi;
            begin_round(c, K_EXT);
            printf("NOTE client %d sends an extend (retake %d)\n", c, retake[c]);
            assert(DL(c, XS) == 0);
            DL(c, XS) = RUNNING;
            rslot[c] = XS;
            send_all(c, K_EXT, retake[c] + 2 * fence[c]);
            /* LIBFIX: a retake that failed at once (rule 2) */
            m_ax = 0; m_av = 0; m_ak = 0; m_art = 0; m_alw = 0;
            for (m_j : 0 .. N - 1) {
                if
                :: LIBFIX && vote[c * N + m_j] == VE -> ext_answer(c, m_j, VE, retake[c], 0)
                :: else -> skip
                fi
            }
            m_j = 0;
            m_again = 1
        :: cs[c] == HOLD ->
            look_deadline(c, hslot[c] - 1);
            late[c] = (DL(c, hslot[c] - 1) == PASSED);
            hold[c] = 0;
            begin_round(c, K_REL);
            printf("NOTE client %d sends its release (late %d)\n", c, late[c]);
            send_all(c, K_REL, 0);
            m_again = 1
        fi;
        settle(c)
       }
    od
}

init
{
    byte i;
    atomic {
        for (i : 0 .. N - 1) { up[i] = 1 }
        for (i : 0 .. NC * N - 1) { cup[i] = 1; listen[i] = 1 }
        c_code {
            broken = rl_knob("RL_BROKEN", 0);
            att0 = rl_knob("RL_ATT0", 1);
            att1 = rl_knob("RL_ATT1", 2);
            fen0 = rl_knob("RL_FEN0", 2);
            fen1 = rl_knob("RL_FEN1", 0);
            exts = rl_knob("RL_EXTS", 0);
            fkinds = rl_knob("RL_FKINDS", 63);
            now.opsleft[0] = rl_knob("RL_OPS0", 1);
            now.opsleft[1] = rl_knob("RL_OPS1", 1);
            now.faults = rl_knob("RL_FAULTS", 0);
            now.empties = rl_knob("RL_EMPTIES", 1);
            held = rl_knob("RL_HELD", 0);
            hostile = rl_knob("RL_HOSTILE", 0);
            amnesia = rl_knob("RL_AMNESIA", 0);
            keep0 = rl_knob("RL_KEEP0", 0);
            librule = rl_knob("RL_LIBRULE", 0);
            now.forge = hostile ? rl_knob("RL_FORGE", 2) : 0;
            track = exts > 0 || amnesia;
        };
        if
        :: held ->
            /* client 0 starts with its first operation won */
            opsleft[0]--;
            nextplace = 1;
            place[0] = 1;
            if
            :: fen0 != 1 -> fenced[0] = 0
            :: fen0 != 0 -> fenced[0] = 1; fence[0] = 1; lastfence = 1
            fi;
            new_token(0);
            att[0] = 1;
            DL(0, 0) = RUNNING;
            hslot[0] = 1;
            /* on every node, or on as few as a won round needs (RL_HELD=2): a bare quorum, or
             * the fence_commit nodes of a fenced lock */
            for (i : 0 .. N - 1) {
                if
                :: held == 1 || i < Q || (fenced[0] && i < FENCE_COMMIT) ->
                    ktok[i] = tok[0];
                    kbind[i] = 1;
                    ctr[i] = fence[0]
                :: else -> skip
                fi
            }
            hold[0] = 1;
            for (i : 0 .. N - 1) {
                if :: track && ktok[i] == tok[0] -> keptm[0] = keptm[0] | (1 << i) :: else -> skip fi
            }
            extleft[0] = exts;
            cs[0] = HOLD
        :: else -> skip
        fi;
#ifdef LIVE
        faults = 0;
#endif
        for (i : 0 .. NC - 1) { run Client(i) }
        for (i : 0 .. N - 1) { run Node(i) }
        for (i : 0 .. NC * N - 1) { run Conn(i / N, i % N) }
        i = 0
    }
}

#ifdef LIVE
/* The queue's liveness: client 1, waiting while client 0 holds and releases, is served. */
ltl served { <> won1 }
#endif
