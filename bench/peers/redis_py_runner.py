"""redis-py's Lock in dlock's side-by-side benchmark: one scenario per run,
the result as one JSON object on stdout (the same fields as
bench/dlock_runner.cpp).

    /usr/bin/python3 redis_py_runner.py --mode default|tuned --scenario S [flags]
    PYTHONPATH=BUILD/python /usr/bin/python3 redis_py_runner.py --lib dlock --scenario S [flags]

--lib dlock runs the same Python scenarios on dlock's Python module (one
dlock.Client per process, made in that process; each thread its own owner),
so the two Python locks are measured by one harness; the counter of the
contended scenario stays on redis-py in both.

default: Lock as its users get it (sleep=0.1 s between attempts);
tuned: sleep=0.001 s (its best case). Every lease is 30 s, like dlock's.
redis-py has no Redlock and no lease renewal: those scenarios are not run.
Besides times, each scenario reports the client CPU and context switches per
operation of its measured phase (all threads of the process, or of every
worker process in the contended one), as dlock's runner does.
"""
import json
import multiprocessing
import os
import random
import resource
import sys
import threading
import time

import redis

LEASE_S = 30


def flags(argv):
    out = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--") and i + 1 < len(argv):
            out[arg[2:]] = argv[i + 1]
    return out


def now_us():
    return time.perf_counter_ns() / 1000.0


def percentile(sorted_values, q):
    if not sorted_values:
        return 0.0
    rank = round(q / 100.0 * (len(sorted_values) - 1))
    return sorted_values[min(len(sorted_values) - 1, max(0, rank))]


def usage():
    """(CPU seconds, user + system; context switches, voluntary + involuntary)
    of this process so far, all its threads."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return (u.ru_utime + u.ru_stime, u.ru_nvcsw + u.ru_nivcsw)


def spent(before, after):
    return (after[0] - before[0], after[1] - before[1])


def cost_fields(cost, ops):
    ops = max(ops, 1)
    return {"client_cpu_us_per_op": cost[0] * 1e6 / ops, "context_switches_per_op": cost[1] / ops}


_dlock_clients = {}  # pid -> this process's dlock.Client


def make_lock(client, name, f):
    if f.get("lib") == "dlock":
        import dlock
        own = _dlock_clients.get(os.getpid())
        if own is None:
            own = _dlock_clients[os.getpid()] = dlock.Client(f["url"])
        return own.lock(name, lease=LEASE_S)
    sleep = 0.001 if f["mode"] == "tuned" else 0.1  # 0.1 s is redis-py's default
    return client.lock(name, timeout=LEASE_S, sleep=sleep)


def busy_wait(us):
    until = now_us() + us
    while now_us() < until:
        pass


def uncontended(f):
    n = int(f.get("n", 10000))
    client = redis.Redis.from_url(f["url"])
    lock = make_lock(client, "bench:uncontended", f)
    for _ in range(n // 10 + 10):
        lock.acquire()
        lock.release()
    lat = []
    before = usage()
    for _ in range(n):
        t0 = now_us()
        lock.acquire()
        lock.release()
        lat.append(now_us() - t0)
    cost = spent(before, usage())
    total = sum(lat)
    lat.sort()
    return {"p50_us": percentile(lat, 50), "p99_us": percentile(lat, 99), "ops_per_s": 1e6 * n / total,
            **cost_fields(cost, n), "quantiles_us": [percentile(lat, i / 2.0) for i in range(201)]}


def contended_process(f, start_at, results):
    tasks, cs = int(f["tasks"]), float(f.get("cs-us", 0))
    stop_at = start_at + int(f["duration-ms"]) / 1000.0
    client = redis.Redis.from_url(f["url"], max_connections=tasks + 4)
    per_worker = [None] * tasks

    def worker(index):
        lock = make_lock(client, "bench:contended", f)
        count, waits = 0, []
        while time.time() < start_at:
            time.sleep(0.001)
        while time.time() < stop_at:
            asked = now_us()
            lock.acquire()
            waited = now_us() - asked
            # Deliberately not atomic: GET, then SET. Lost updates show overlap.
            seen = int(client.get("bench:counter") or 0)
            if cs > 0:
                busy_wait(cs)
            client.set("bench:counter", seen + 1)
            lock.release()
            if len(waits) < 2048:
                waits.append(waited)
            count += 1
        per_worker[index] = {"count": count, "waits": waits}

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(tasks)]
    for t in threads:
        t.start()
    # This process's measured phase: from the start of the race until its
    # last worker is done.
    time.sleep(max(0.0, start_at - time.time()))
    before = usage()
    for t in threads:
        t.join()
    results.put({"workers": per_worker, "cost": spent(before, usage())})


def contended(f):
    processes = int(f.get("processes", 4))
    client = redis.Redis.from_url(f["url"])
    client.delete("bench:counter")
    start_at = time.time() + 1.5  # every process starts racing together
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    children = [context.Process(target=contended_process, args=(f, start_at, results)) for _ in range(processes)]
    for child in children:
        child.start()
    workers, cost = [], (0.0, 0)
    for _ in children:
        result = results.get()
        workers.extend(result["workers"])
        cost = (cost[0] + result["cost"][0], cost[1] + result["cost"][1])
    for child in children:
        child.join()
    total = sum(w["count"] for w in workers)
    sum_sq = sum(w["count"] ** 2 for w in workers)
    waits = sorted(x for w in workers for x in w["waits"])
    counted = int(client.get("bench:counter") or 0)
    return {"acquisitions": total, "acq_per_s": total / (int(f["duration-ms"]) / 1000.0),
            "wait_p50_us": percentile(waits, 50), "wait_p99_us": percentile(waits, 99),
            "wait_max_us": waits[-1] if waits else 0.0,
            "jain": (total * total) / (len(workers) * sum_sq) if sum_sq else 0.0,
            "counter": counted, "counter_exact": counted == total, **cost_fields(cost, total)}


def many(f):
    tasks, names = int(f.get("tasks", 64)), int(f.get("names", 10000))
    duration = int(f.get("duration-ms", 5000)) / 1000.0
    client = redis.Redis.from_url(f["url"], max_connections=tasks + 4)
    stop_at = time.time() + duration
    counts = [0] * tasks

    def worker(index):
        rng = random.Random(index)
        while time.time() < stop_at:
            lock = make_lock(client, "bench:many:%d" % rng.randrange(names), f)
            lock.acquire()
            lock.release()
            counts[index] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(tasks)]
    before = usage()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"ops": sum(counts), "ops_per_s": sum(counts) / duration,
            **cost_fields(spent(before, usage()), sum(counts))}


def main():
    f = flags(sys.argv[1:])
    scenarios = {"uncontended": uncontended, "contended": contended, "many": many}
    if f.get("scenario") not in scenarios:
        print("redis_py_runner: unknown --scenario %s" % f.get("scenario"), file=sys.stderr)
        return 2
    print(json.dumps(scenarios[f["scenario"]](f)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
