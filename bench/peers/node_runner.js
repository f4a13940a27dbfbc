// The Node.js peers' side of the side-by-side benchmark: node-redlock (with
// ioredis) and redis-semaphore's Mutex, one scenario per run, the result as
// one JSON object on stdout (the same fields as bench/dlock_runner.cpp).
//
//   node node_runner.js --lib redlock|semaphore --mode default|tuned --scenario S [flags]
//
// default: each library as its users get it; tuned: its retry interval cut
// to 1 ms (its best case). Every lease is 30 s, like dlock's default.
// Besides times, each scenario reports the client CPU and context switches
// per operation of its measured phase (all threads of the process: the event
// loop, libuv's pool, V8's helpers; every worker process in the contended
// one), as dlock's runner does.
'use strict';
const { fork } = require('child_process');
const Redis = require('ioredis');
const Redlock = require('redlock').default;
const { Mutex, RedlockMutex, Semaphore } = require('redis-semaphore');

const LEASE_MS = 30000;

function flags(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) out[argv[i].slice(2)] = argv[i + 1];
  }
  return out;
}

function client(url) {
  return new Redis(url, { enableAutoPipelining: false, maxRetriesPerRequest: 1 });
}

const now = () => Number(process.hrtime.bigint()) / 1000; // microseconds

function percentile(sorted, q) {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.round((q / 100) * (sorted.length - 1))));
  return sorted[rank];
}

function quantiles(sorted) {
  const out = [];
  for (let i = 0; i <= 200; i++) out.push(percentile(sorted, i / 2));
  return out;
}

// CPU (user + system, µs) and context switches (voluntary + involuntary) of
// this process so far, all its threads: getrusage(RUSAGE_SELF) through libuv.
function usage() {
  const u = process.resourceUsage();
  return { cpuUs: u.userCPUTime + u.systemCPUTime, switches: u.voluntaryContextSwitches + u.involuntaryContextSwitches };
}

function spent(before, after) {
  return { cpuUs: after.cpuUs - before.cpuUs, switches: after.switches - before.switches };
}

function costFields(cost, ops, prefix = '') {
  const n = Math.max(ops, 1);
  return { [prefix + 'client_cpu_us_per_op']: cost.cpuUs / n, [prefix + 'context_switches_per_op']: cost.switches / n };
}

function busyWait(us) {
  const until = now() + us;
  while (now() < until) { /* spin */ }
}

// A lock handle with acquire() (waits) and release(), per library and mode.
// Every worker makes its own: each is a distinct owner.
function makeLocker(lib, mode, clients, name, permits = 0) {
  const tuned = mode === 'tuned';
  if (lib === 'redlock') {
    const settings = tuned ? { retryDelay: 1, retryJitter: 1, retryCount: -1 } : {};
    const redlock = new Redlock(clients, settings);
    let held = null;
    return {
      async acquire() {
        for (;;) {
          try {
            held = await redlock.acquire([name], LEASE_MS);
            return;
          } catch (e) {
            // Default settings give up after 10 retries: its users retry too.
            if (!e || (e.name !== 'ExecutionError' && e.name !== 'ResourceLockedError')) throw e;
          }
        }
      },
      async release() { await held.release(); held = null; },
    };
  }
  if (lib === 'semaphore') {
    const options = { lockTimeout: LEASE_MS, ...(tuned ? { retryInterval: 1 } : {}) };
    // With permits: redis-semaphore's Semaphore of that many permits.
    const mutex = permits > 0 ? new Semaphore(clients[0], name, permits, options)
      : clients.length > 1 ? new RedlockMutex(clients, name, options) : new Mutex(clients[0], name, options);
    return {
      async acquire() {
        for (;;) {
          try {
            await mutex.acquire();
            return;
          } catch (e) {
            // acquireTimeout (10 s by default) ran out: try again, as a user would.
            if (!e || !/timeout/i.test(e.message)) throw e;
          }
        }
      },
      async release() { await mutex.release(); },
    };
  }
  throw new Error('unknown --lib ' + lib);
}

async function uncontended(f) {
  const n = Number(f.n || 10000);
  const c = client(f.url);
  const locker = makeLocker(f.lib, f.mode, [c], 'bench:uncontended');
  for (let i = 0; i < n / 10 + 10; i++) { await locker.acquire(); await locker.release(); }
  const lat = [];
  const before = usage();
  for (let i = 0; i < n; i++) {
    const t0 = now();
    await locker.acquire();
    await locker.release();
    lat.push(now() - t0);
  }
  const cost = spent(before, usage());
  const total = lat.reduce((a, b) => a + b, 0);
  lat.sort((a, b) => a - b);
  c.disconnect();
  return {
    p50_us: percentile(lat, 50), p99_us: percentile(lat, 99), ops_per_s: (1e6 * n) / total,
    ...costFields(cost, n), quantiles_us: quantiles(lat),
  };
}

// One process of the contended scenario: `tasks` concurrent workers.
async function contendedWorker(f) {
  const tasks = Number(f.tasks), cs = Number(f['cs-us'] || 0);
  const startAt = Number(f['start-at']), stopAt = startAt + Number(f['duration-ms']);
  const c = client(f.url);
  while (Date.now() < startAt) await new Promise((r) => setTimeout(r, 1));
  // This process's measured phase: from the start of the race until its last task is done.
  const before = usage();
  const permits = Number(f.permits || 0);
  let maxInside = 0;
  const results = await Promise.all(Array.from({ length: tasks }, async () => {
    const locker = makeLocker(f.lib, f.mode, [c], permits > 0 ? 'bench:semaphore' : 'bench:contended', permits);
    let count = 0;
    const waits = [];
    while (Date.now() < stopAt) {
      const asked = now();
      await locker.acquire();
      const waited = now() - asked;
      if (permits > 0) {
        // Holders count themselves in and out on the server: at most `permits` at once.
        maxInside = Math.max(maxInside, Number(await c.incr('bench:inside')));
        if (cs > 0) busyWait(cs);
        await c.decr('bench:inside');
        await locker.release();
        if (waits.length < 2048) waits.push(waited);
        count++;
        continue;
      }
      // Deliberately not atomic: GET, then SET. Lost updates show overlap.
      const seen = Number((await c.get('bench:counter')) || 0);
      if (cs > 0) busyWait(cs);
      await c.set('bench:counter', String(seen + 1));
      await locker.release();
      if (waits.length < 2048) waits.push(waited);
      count++;
    }
    return { count, waits };
  }));
  const cost = spent(before, usage());
  c.disconnect();
  return { workers: results.map((r) => ({ ...r, maxInside })), cost };
}

async function contended(f) {
  const processes = Number(f.processes || 4);
  const c = client(f.url);
  await c.del('bench:counter', 'bench:inside');
  const startAt = Date.now() + 1500; // every process starts racing together
  const args = ['--role', 'worker', '--start-at', String(startAt)];
  for (const [k, v] of Object.entries(f)) if (k !== 'role') args.push('--' + k, v);
  const children = Array.from({ length: processes }, () => new Promise((resolve, reject) => {
    const child = fork(__filename, args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    child.on('message', resolve);
    child.on('exit', (code) => { if (code) reject(new Error('worker exited ' + code)); });
  }));
  const perProcess = await Promise.all(children);
  const workers = perProcess.flatMap((p) => p.workers);
  const cost = perProcess.reduce((a, p) => ({ cpuUs: a.cpuUs + p.cost.cpuUs, switches: a.switches + p.cost.switches }),
    { cpuUs: 0, switches: 0 });
  const total = workers.reduce((a, w) => a + w.count, 0);
  const sum = total, sumSq = workers.reduce((a, w) => a + w.count * w.count, 0);
  const waits = workers.flatMap((w) => w.waits).sort((a, b) => a - b);
  const permits = Number(f.permits || 0);
  const maxInside = Math.max(0, ...workers.map((w) => w.maxInside || 0));
  // With permits there is no shared counter: the limit, as the server counted holders, is the check.
  const counted = permits > 0 ? (maxInside > permits ? -1 : total) : Number((await c.get('bench:counter')) || 0);
  c.disconnect();
  return {
    ...(permits > 0 ? { permits, max_inside: maxInside, over_limit: maxInside > permits } : {}),
    acquisitions: total,
    acq_per_s: total / (Number(f['duration-ms']) / 1000),
    wait_p50_us: percentile(waits, 50),
    wait_p99_us: percentile(waits, 99),
    wait_max_us: waits.length ? waits[waits.length - 1] : 0,
    jain: sumSq > 0 ? (sum * sum) / (workers.length * sumSq) : 0,
    counter: counted,
    counter_exact: counted === total,
    ...costFields(cost, total),
  };
}

async function many(f) {
  const tasks = Number(f.tasks || 64), names = Number(f.names || 10000);
  const duration = Number(f['duration-ms'] || 5000);
  const c = client(f.url);
  await c.ping();
  const stopAt = Date.now() + duration;
  let ops = 0;
  const before = usage();
  await Promise.all(Array.from({ length: tasks }, async () => {
    const lockers = new Map();
    while (Date.now() < stopAt) {
      const name = 'bench:many:' + Math.floor(Math.random() * names);
      if (!lockers.has(name)) lockers.set(name, makeLocker(f.lib, f.mode, [c], name));
      const locker = lockers.get(name);
      await locker.acquire();
      await locker.release();
      ops++;
    }
  }));
  const cost = spent(before, usage());
  c.disconnect();
  return { ops, ops_per_s: ops / (duration / 1000), ...costFields(cost, ops) };
}

async function redlockScenario(f) {
  const n = Number(f.n || 5000);
  const single = client(f.url);
  const masters = f.urls.split(',').map(client);
  const one = makeLocker(f.lib, f.mode, [single], 'bench:redlock1');
  const five = makeLocker(f.lib, f.mode, masters, 'bench:redlock5');
  const measure = async (locker, into) => {
    const t0 = now();
    await locker.acquire();
    await locker.release();
    if (into) into.push(now() - t0);
  };
  for (let i = 0; i < n / 10 + 10; i++) { await measure(one); await measure(five); }
  const a = [], b = [];
  for (let i = 0; i < n; i++) { await measure(one, a); await measure(five, b); }
  // Then n of each alone, for their cost with nothing else in the loop.
  const costOf = async (locker) => {
    const before = usage();
    for (let i = 0; i < n; i++) await measure(locker);
    return spent(before, usage());
  };
  const oneCost = await costOf(one), fiveCost = await costOf(five);
  a.sort((x, y) => x - y); b.sort((x, y) => x - y);
  single.disconnect(); masters.forEach((m) => m.disconnect());
  return {
    single_p50_us: percentile(a, 50), single_p99_us: percentile(a, 99),
    five_p50_us: percentile(b, 50), five_p99_us: percentile(b, 99),
    five_over_single_p50: percentile(b, 50) / percentile(a, 50),
    ...costFields(oneCost, n, 'single_'), ...costFields(fiveCost, n, 'five_'),
    five_over_single_cpu: fiveCost.cpuUs / Math.max(oneCost.cpuUs, 1e-3),
  };
}

async function main() {
  const f = flags(process.argv.slice(2));
  if (f.role === 'worker') {
    process.send(await contendedWorker(f), () => process.exit(0));
    return;
  }
  const scenarios = { uncontended, contended, many, redlock: redlockScenario };
  const run = scenarios[f.scenario];
  if (!run) throw new Error('unknown --scenario ' + f.scenario);
  process.stdout.write(JSON.stringify(await run(f)) + '\n');
  process.exit(0);
}

main().catch((e) => { console.error('node_runner:', e && e.stack ? e.stack : e); process.exit(1); });
