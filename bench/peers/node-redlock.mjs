// SPDX-License-Identifier: MIT
// bench/peers/node-redlock.mjs - node-redlock (v5, on ioredis) through the workloads of
// redlock-bench's latency, throughput and contention scenarios, on the same servers, with the
// same ttl, durations and retry settings, so that bench/run --peers can print libredlock/peer
// ratios from one run. Plain ESM, no build step; bench/run copies it next to the node_modules
// it installs in a temporary directory and passes it to redlock-bench as --then.
//
//   node node-redlock.mjs --scenario NAME --nodes URL,... --duration S [--quick] [--json FILE]
//
// A scenario it has no workload for (limit, scale, faults, ...) is skipped without a word, so
// that it can follow every scenario of a run. Prints a table row per figure and, with --json,
// appends one JSON object per row ("impl":"node-redlock"). Exits 1 when the workload could not
// run (a server down, a cycle that never ends); what node-redlock does under it (failed
// acquires, lost updates) is reported, not judged.
import { appendFileSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";

import { Redis } from "ioredis";
import Redlock from "redlock";

const SCHEMA = 2; // bench/stats.h BENCH_SCHEMA
// bench/redlock-bench.c's defaults and sc_speed.c's constants.
const TTL_MS = 10000;
const DRIFT_FACTOR = 0.01;
const SLICES = 4;
const WARM_UP_S = 0.2;
const THROUGHPUT_LEVELS = [1, 16, 64, 256];
// sc_contention.c's constants.
const CONTENTION_TTL_MS = 100;
const CONTENTION_LEVELS = [2, 8, 32];
const OVERRUN_FIRST_US = 300000;
const OVERRUN_EVERY_US = 1000000;
const THINK_MS = 1;
const RTT_PINGS = 200;
// The library polls every 1 +/- 1 ms with notify off; node-redlock has only this model.
const RETRY_DELAY_MS = 1;
const RETRY_JITTER_MS = 1;
// The library's contention acquires wait up to 10 s (wait_ms); node-redlock bounds retries by
// count, and each attempt is a round trip plus a 0-2 ms delay, so 10,000 attempts wait longer.
const CONTENTION_RETRY_COUNT = 10000;
const RESOURCE = "bench:peers:contended";
const COUNTER = "bench:peers:contended:counter";

function parseArgs(argv) {
    const opts = { scenarios: [], nodes: [], durationS: 5, quick: false, json: null };
    for (let i = 0; i < argv.length; i++) {
        const arg = argv[i];
        const value = () => {
            if (i + 1 >= argv.length)
                throw new Error(`${arg} needs a value`);
            return argv[++i];
        };
        if (arg === "--scenario")
            opts.scenarios.push(value());
        else if (arg === "--nodes")
            opts.nodes = value().split(",").filter((u) => u !== "");
        else if (arg === "--duration")
            opts.durationS = Number(value());
        else if (arg === "--quick")
            opts.quick = true;
        else if (arg === "--json")
            opts.json = value();
        else
            throw new Error(`unknown argument "${arg}"`);
    }
    if (opts.nodes.length === 0)
        throw new Error("no nodes: give --nodes");
    if (!(opts.durationS > 0 && opts.durationS <= 3600))
        throw new Error("bad --duration (seconds, 0..3600)");
    if (opts.quick && opts.durationS > 1)
        opts.durationS = 1;
    return opts;
}

// The bench's clock: monotonic microseconds.
const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const cpuUs = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
};

// Nearest-rank percentiles, as bench/stats.c computes them.
function percentiles(values) {
    const v = Float64Array.from(values).sort();
    const n = v.length;
    const at = (perMille) => (n === 0 ? 0 : v[Math.max(0, Math.ceil((perMille * n) / 1000) - 1)]);
    return { p50: at(500), p90: at(900), p99: at(990), p999: at(999), max: n ? v[n - 1] : 0, n };
}

// The lower middle value when even (a value that was measured), as median_of in stats.c.
function medianOf(values) {
    const v = [...values].sort((a, b) => a - b);
    return v.length === 0 ? 0 : v[Math.max(0, Math.ceil((500 * v.length) / 1000) - 1)];
}

function packageVersion(name) {
    try {
        const url = new URL(`./node_modules/${name}/package.json`, import.meta.url);
        return JSON.parse(readFileSync(url, "utf8")).version.replace(/^v/, "");
    } catch {
        return "unknown";
    }
}

const versions = {
    node: process.version,
    redlock: packageVersion("redlock"),
    ioredis: packageVersion("ioredis"),
};

// One ioredis connection to url (a query string such as ?timeout_ms=50 is the library's and
// is dropped), connected before it is used; ioredis's defaults otherwise, as a user would have.
async function connect(url) {
    const client = new Redis(url.replace(/\?.*$/, ""), { lazyConnect: true });
    client.on("error", (err) => {
        process.stderr.write(`node-redlock bench: ${url}: ${err.message}\n`);
    });
    await client.connect();
    return client;
}

const connectAll = (urls) => Promise.all(urls.map(connect));
const closeAll = (clients) => Promise.all(clients.map((c) => c.quit()));

function jsonRow(opts, scenario, fields, loadStart) {
    if (opts.json === null)
        return;
    const row = {
        schema: SCHEMA,
        scenario,
        impl: "node-redlock",
        ...fields,
        versions,
        loadavg_start: loadStart,
        loadavg_end: loadavg().map((x) => Number(x.toFixed(2))),
    };
    appendFileSync(opts.json, JSON.stringify(row) + "\n");
}

const loadNow = () => loadavg().map((x) => Number(x.toFixed(2)));
const pad = (x, width) => String(x).padStart(width);

// ---- chains: `width` independent workers, each doing acquire + release cycles back to back ----

let resourceSeq = 0;

// Runs width workers for seconds; returns cycles per second (cycles finished, over the time
// until the last one finished), as run_chain in sc_speed.c. Each cycle is on a fresh resource.
// A failed cycle's cause, in node-redlock's words, counted for the row (as bench/outcome.c does
// for the library): a failed cycle is a figure of its row, never a failed run.
function noteFailure(rec, err) {
    rec.failures++;
    const cause = String(err?.message ?? err).slice(0, 80);
    rec.causes ??= new Map();
    rec.causes.set(cause, (rec.causes.get(cause) ?? 0) + 1);
}

// The line under a row with failed cycles: how many, why, the load average.
function printFailures(rec, completed) {
    if (!rec.failures)
        return;
    const causes = [...(rec.causes ?? new Map())].sort((a, b) => b[1] - a[1]).slice(0, 4)
        .map(([cause, n]) => `${n} ${cause}`).join(", ");
    console.log(
        `  failed: ${rec.failures} cycle${rec.failures === 1 ? "" : "s"} (${completed} ` +
            `completed): ${causes || "unclassified"}; load average ${loadavg()[0].toFixed(2)}`,
    );
}

async function runChain(redlock, width, seconds, rec) {
    const until = nowUs() + seconds * 1e6;
    const cpu0 = cpuUs();
    const start = nowUs();
    let cycles = 0;
    async function worker(id) {
        while (nowUs() < until) {
            const name = `bench:peers:${id}:${resourceSeq++}`;
            const t0 = nowUs();
            let lock;
            try {
                lock = await redlock.acquire([name], TTL_MS);
            } catch (err) {
                noteFailure(rec, err);
                continue;
            }
            const t1 = nowUs();
            try {
                await lock.release();
            } catch (err) {
                noteFailure(rec, err);
            }
            const t2 = nowUs();
            cycles++;
            rec.acquire?.push(t1 - t0);
            rec.release?.push(t2 - t1);
            rec.cycle?.push(t2 - t0);
        }
    }
    await Promise.all(Array.from({ length: width }, (_, id) => worker(id)));
    const elapsedS = (nowUs() - start) / 1e6;
    rec.cpuUs = (rec.cpuUs ?? 0) + cpuUs() - cpu0;
    rec.cycles = (rec.cycles ?? 0) + cycles;
    return cycles / elapsedS;
}

// One client as a user would make it: a Redlock on one ioredis connection per node, warmed up
// (the servers learn its scripts, the connections are up).
async function speedStart(opts) {
    const clients = await connectAll(opts.nodes);
    const redlock = new Redlock(clients, { driftFactor: DRIFT_FACTOR, retryCount: 0 });
    await runChain(redlock, 1, WARM_UP_S, { failures: 0 });
    return { clients, redlock };
}

// sc_speed.c's latency: one cycle at a time, for the time the library's side gets there (a
// third of the duration: it shares it with two raw sides).
async function latency(opts) {
    const load = loadNow();
    const env = await speedStart(opts);
    const rec = { acquire: [], release: [], cycle: [], failures: 0 };
    await runChain(env.redlock, 1, opts.durationS / 3, rec);
    await closeAll(env.clients);
    const pa = percentiles(rec.acquire), pr = percentiles(rec.release);
    const pc = percentiles(rec.cycle);
    console.log(
        `${"latency".padEnd(11)} node-redlock: cycle p50 ${pad(pc.p50, 5)} us p99 ` +
            `${pad(pc.p99, 6)} | acquire p50 ${pad(pa.p50, 5)} | release p50 ${pad(pr.p50, 5)}`,
    );
    printFailures(rec, pc.n);
    jsonRow(opts, "latency", {
        in_flight: 1,
        ttl_ms: TTL_MS,
        acquire_us: pa,
        release_us: pr,
        cycle_us: pc,
        failures: rec.failures,
    }, load);
    return true;
}

// sc_speed.c's throughput: width cycles in flight on distinct resources, in SLICES slices of the
// time the library's side gets (its rows alternate lock and raw slices over the duration); the
// median slice is the row's figure.
async function throughput(opts) {
    const env = await speedStart(opts);
    for (const width of THROUGHPUT_LEVELS) {
        const load = loadNow();
        const rec = { cycle: [], failures: 0 };
        const slices = [];
        for (let k = 0; k < SLICES; k++)
            slices.push(await runChain(env.redlock, width, opts.durationS / (2 * SLICES), rec));
        const rate = medianOf(slices);
        const pc = percentiles(rec.cycle);
        const cpu = rec.cycles > 0 ? rec.cpuUs / rec.cycles : 0;
        console.log(
            `${"throughput".padEnd(11)} node-redlock ${pad(width, 4)} in flight: ` +
                `${pad(rate.toFixed(0), 6)} cycles/s | p99 ${pad(pc.p99, 6)} us | cpu ` +
                `${cpu.toFixed(1)} us/cycle`,
        );
        printFailures(rec, pc.n);
        jsonRow(opts, "throughput", {
            concurrency: width,
            ttl_ms: TTL_MS,
            cycles_per_s: Number(rate.toFixed(1)),
            cycle_us: pc,
            slices: slices.map((s) => Number(s.toFixed(1))),
            cpu_us_per_cycle: Number(cpu.toFixed(2)),
            failures: rec.failures,
        }, load);
    }
    await closeAll(env.clients);
    return true;
}

// ---- contention: sc_contention.c's workload ----------------------------------------------------

async function medianRttUs(client) {
    const rtt = [];
    for (let i = 0; i < RTT_PINGS; i++) {
        const t0 = nowUs();
        await client.ping();
        rtt.push(nowUs() - t0);
    }
    return percentiles(rtt).p50;
}

// One contention worker: take the lock, GET the counter on the data server, SET it + 1 only while
// the lock is still valid by node-redlock's own reckoning (lock.expiration), release, think.
// Once a second a hold runs on past its ttl before its critical section, as in sc_contention.c.
async function contender(ct, w) {
    while (nowUs() < ct.untilUs) {
        const acquireStartUs = nowUs();
        let lock;
        try {
            lock = await w.redlock.acquire([RESOURCE], CONTENTION_TTL_MS);
        } catch (err) {
            noteFailure(ct, err);
            continue;
        }
        const now = nowUs();
        if (ct.lastReleaseUs !== 0 && ct.lastReleaser !== w && acquireStartUs < ct.lastReleaseUs)
            ct.handoff.push(now - ct.lastReleaseUs);
        ct.acquisitions++;
        w.acquisitions++;
        let overrun = false;
        if (now >= ct.nextOverrunUs) {
            ct.nextOverrunUs = now + OVERRUN_EVERY_US;
            ct.overruns++;
            overrun = true;
            await sleep(CONTENTION_TTL_MS + 20);
        }
        const value = Number((await w.data.get(COUNTER)) ?? 0);
        if (Date.now() < lock.expiration) {
            ct.writes++;
            await w.data.set(COUNTER, value + 1);
        } else {
            ct.skipped++;
        }
        ct.lastReleaseUs = nowUs();
        ct.lastReleaser = w;
        // No retries for the release: with the instance's 10,000 a release of an expired lock
        // would retry for seconds (node-redlock retries a release that finds no key).
        try {
            await w.redlock.release(lock, { retryCount: 0 });
        } catch (err) {
            if (overrun)
                ct.lostReleases++;
            else
                noteFailure(ct, err);
        }
        await sleep(THINK_MS);
    }
}

async function contentionLevel(opts, workers) {
    const load = loadNow();
    const ct = {
        untilUs: 0, nextOverrunUs: 0, acquisitions: 0, failures: 0, writes: 0, skipped: 0,
        overruns: 0, lostReleases: 0, lastReleaseUs: 0, lastReleaser: null, handoff: [],
    };
    // Every worker a client of its own: its own Redlock, its own connections to every node and to
    // the data server (the first node's server).
    const ws = [];
    for (let i = 0; i < workers; i++) {
        const clients = await connectAll(opts.nodes);
        const redlock = new Redlock(clients, {
            driftFactor: DRIFT_FACTOR,
            retryCount: CONTENTION_RETRY_COUNT,
            retryDelay: RETRY_DELAY_MS,
            retryJitter: RETRY_JITTER_MS,
        });
        ws.push({ clients, redlock, data: await connect(opts.nodes[0]), acquisitions: 0 });
    }
    await ws[0].data.set(COUNTER, 0);
    const rttUs = await medianRttUs(ws[0].data);
    const start = nowUs();
    ct.untilUs = start + opts.durationS * 1e6;
    ct.nextOverrunUs = start + OVERRUN_FIRST_US;
    await Promise.all(ws.map((w) => contender(ct, w)));
    const elapsedS = (nowUs() - start) / 1e6;
    const final = Number((await ws[0].data.get(COUNTER)) ?? -1);
    await ws[0].data.del(COUNTER);
    const lost = ct.writes - final;
    const turns = ws.map((w) => w.acquisitions);
    const sum = turns.reduce((a, b) => a + b, 0);
    const sumSq = turns.reduce((a, b) => a + b * b, 0);
    const jain = sumSq > 0 ? (sum * sum) / (workers * sumSq) : 0;
    const ph = percentiles(ct.handoff);
    const rate = elapsedS > 0 ? ct.acquisitions / elapsedS : 0;
    for (const w of ws)
        await closeAll([...w.clients, w.data]);
    console.log(
        `${"contention".padEnd(11)} node-redlock ${pad(workers, 2)} workers, polling: ` +
            `${pad(rate.toFixed(0), 5)} acquisitions/s | handoff p50 ${pad(ph.p50, 5)} us | ` +
            `lost_updates ${lost}`,
    );
    printFailures(ct, ct.acquisitions);
    jsonRow(opts, "contention", {
        notify: false,
        retry_delay_ms: RETRY_DELAY_MS,
        retry_jitter_ms: RETRY_JITTER_MS,
        retry_count: CONTENTION_RETRY_COUNT,
        jain_index: Number(jain.toFixed(3)),
        rtt_us: rttUs,
        think_us: THINK_MS * 1000,
        workers,
        clients: workers,
        ttl_ms: CONTENTION_TTL_MS,
        acquisitions: ct.acquisitions,
        acquisitions_per_s: Number(rate.toFixed(1)),
        handoff_us: ph,
        per_worker_min: Math.min(...turns),
        per_worker_max: Math.max(...turns),
        writes: ct.writes,
        final_counter: final,
        lost_updates: lost,
        expired_holds: ct.overruns,
        skipped_writes: ct.skipped,
        lost_releases: ct.lostReleases,
        failures: ct.failures,
    }, load);
    return final >= 0;
}

async function contention(opts) {
    let ok = true;
    for (const workers of CONTENTION_LEVELS)
        ok = (await contentionLevel(opts, workers)) && ok;
    return ok;
}

const workloads = { latency, throughput, contention };

async function main() {
    let opts;
    try {
        opts = parseArgs(process.argv.slice(2));
    } catch (err) {
        process.stderr.write(`node-redlock bench: ${err.message}\n`);
        return 64;
    }
    let ok = true;
    for (const name of opts.scenarios) {
        if (workloads[name] !== undefined)
            ok = (await workloads[name](opts)) && ok;
    }
    return ok ? 0 : 1;
}

// A workload that hangs (a server gone) must not hold bench/run forever: at most 10 minutes.
const guard = setTimeout(() => {
    process.stderr.write("node-redlock bench: did not finish in 600 s\n");
    process.exit(1);
}, 600000);
guard.unref();
main().then(
    (code) => {
        process.exitCode = code;
    },
    (err) => {
        process.stderr.write(`node-redlock bench: ${err.stack ?? err}\n`);
        process.exitCode = 1;
    },
);
