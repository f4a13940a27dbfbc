"""dlock next to other Redis lock libraries, in one run, on the same servers.

    /usr/bin/python3 bench/compare.py --build BUILD_DIR --out DIR [--quick]

Starts private redis-server processes (one for the single-server scenarios,
five masters for Redlock) on free loopback ports, runs every library's runner
(bench/dlock_runner.cpp, bench/peers/*) for every scenario, measures the
server's own capacity for dlock's scripts with redis-benchmark, and writes
DIR/compare.json, DIR/compare.md and DIR/*.png. Every run has a time limit;
the servers are stopped by pid at the end.

Next to times, it reports figures a busy machine moves little: client CPU
and context switches per operation (every runner measures its own process,
all threads, over the measured phase), heap allocations per operation
(dlock's runner counts its operator new), and the server's CPU per
operation (INFO cpu and commandstats before and after a run), the last for
the many-names scenario next to redis-benchmark on the same script paths.
--quick checks that those counters are there, never timings.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "faults"))
from topologies import ClusterSet  # noqa: E402  (the fault suite's cluster: three masters with a replica each)
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(HERE, "peers")
PYTHON = "/usr/bin/python3"  # Debian's, where python3-redis lives


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A private redis-server; stopped by pid."""

    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="dlock-compare-")
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log"), "--protected-mode", "no"])
        for _ in range(500):
            if self.cli("PING").strip() == "PONG":
                return
            time.sleep(0.01)
        raise RuntimeError("redis-server on port %d did not start" % self.port)

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def cli(self, *args):
        result = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True,
                                timeout=30)
        return result.stdout

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


CLUSTER_LABEL = "dlock (3-master cluster)"


class NodeCli:
    """redis-cli against one node, as server_usage() wants it."""

    def __init__(self, port):
        self.port = port

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True,
                              timeout=30).stdout


def many_on_cluster(build, quick, limit):
    """dlock's many-names scenario on a Redis Cluster of three masters (each
    with a replica), next to the one-server run: the same 64 workers and
    10,000 names, the servers' CPU summed over the six nodes."""
    print("%-32s %s" % (CLUSTER_LABEL, "many"), flush=True)
    cluster = ClusterSet()
    try:
        nodes = [NodeCli(n.port) for n in cluster.nodes]
        before = [server_usage(n) for n in nodes]
        command = [os.path.join(build, "bench", "dlock_runner"), "--kind", "lock", "--scenario", "many", "--url",
                   cluster.url(), "--tasks", "64", "--names", "10000", "--duration-ms", "400" if quick else "5000"]
        try:
            value = run_json(command, limit)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            print("  error: %s" % str(e)[-500:], flush=True)
            return {"error": str(e)[-500:]}
        after = [server_usage(n) for n in nodes]
        cpu = sum(a["cpu_seconds"] - b["cpu_seconds"] for a, b in zip(after, before))
        value["server_cpu_us_per_op"] = cpu * 1e6 / max(value.get("ops", 0), 1)
        return value
    finally:
        cluster.close()


def run_json(command, limit):
    """Runs one runner; its last stdout line is its JSON result."""
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True, timeout=limit, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(command[:6]), result.returncode, result.stderr[-2000:]))
    value = json.loads(result.stdout.strip().splitlines()[-1])
    value["run_seconds"] = round(time.time() - started, 2)
    return value


# dlock's exclusive lock kinds, as (label, dlock_runner --kind): each runs the
# scenarios written for any lock with Lock's API (KIND_SCENARIOS). The first
# is dlock::Lock, which the goals are about, and runs the others too.
DLOCK_KINDS = [("dlock", "lock"), ("dlock FairLock", "fair")]
KIND_SCENARIOS = ["uncontended", "contended", "contended_cs100", "many", "watchdog"]
LOCK_ONLY_SCENARIOS = ["redlock", "multi", "multi_contended", "semaphore", "rwlock_read_mostly", "rwlock_exclusive"]


DLOCK_PYTHON_LABEL = "dlock Python"


def libraries(build, quick):
    """(label, runner command prefix, scenarios it supports)."""
    dlock = [os.path.join(build, "bench", "dlock_runner")]
    node = ["node", os.path.join(PEERS, "node_runner.js")]
    py = [PYTHON, os.path.join(PEERS, "redis_py_runner.py")]
    out = [(label, dlock + ["--kind", kind], KIND_SCENARIOS + (LOCK_ONLY_SCENARIOS if i == 0 else []))
           for i, (label, kind) in enumerate(DLOCK_KINDS)]
    # dlock's Python module (python/), on the same harness as redis-py's Lock.
    if glob.glob(os.path.join(build, "python", "dlock", "_dlock*.so")):
        out.append((DLOCK_PYTHON_LABEL, ["env", "PYTHONPATH=" + os.path.join(os.path.abspath(build), "python")] + py
                    + ["--lib", "dlock", "--mode", "default"], ["uncontended", "contended", "contended_cs100", "many"]))
    modes = ["tuned"] if quick else ["default", "tuned"]
    for mode in modes:
        out.append(("redis-py Lock (%s)" % mode, py + ["--mode", mode], ["uncontended", "contended", "contended_cs100", "many"]))
        out.append(("node-redlock (%s)" % mode, node + ["--lib", "redlock", "--mode", mode],
                    ["uncontended", "contended", "contended_cs100", "many", "redlock"]))
        out.append(("redis-semaphore Mutex (%s)" % mode, node + ["--lib", "semaphore", "--mode", mode],
                    ["uncontended", "contended", "contended_cs100", "many", "redlock"]))
        out.append(("redis-semaphore Semaphore (%s)" % mode, node + ["--lib", "semaphore", "--mode", mode],
                    ["semaphore"]))
    return out


def contended_shape(quick):
    """(processes, threads or tasks per process) of the contended scenarios."""
    return (2, 2) if quick else (4, 8)


def scenario_flags(scenario, server, masters, quick):
    processes, tasks = (str(x) for x in contended_shape(quick))
    if scenario == "uncontended":
        return ["--scenario", "uncontended", "--url", server.url, "--n", "300" if quick else "10000"]
    if scenario in ("contended", "contended_cs100"):
        return ["--scenario", "contended", "--url", server.url,
                "--processes", processes, "--tasks", tasks,
                "--duration-ms", "400" if quick else "5000", "--cs-us", "100" if scenario == "contended_cs100" else "0"]
    if scenario == "semaphore":
        # A semaphore of 4 permits, 32 workers (4 processes × 8).
        return ["--scenario", "contended", "--url", server.url, "--permits", "4",
                "--processes", processes, "--tasks", tasks,
                "--duration-ms", "400" if quick else "5000", "--cs-us", "0"]
    if scenario == "many":
        return ["--scenario", "many", "--url", server.url, "--tasks", "64", "--names", "10000",
                "--duration-ms", "400" if quick else "5000"]
    if scenario == "multi":
        return ["--scenario", "multi", "--url", server.url, "--n", "200" if quick else "5000"]
    if scenario == "multi_contended":
        return ["--scenario", "multi_contended", "--url", server.url, "--processes", processes,
                "--tasks", tasks, "--duration-ms", "400" if quick else "5000", "--cs-us", "0"]
    if scenario == "redlock":
        return ["--scenario", "redlock", "--url", server.url, "--urls", ",".join(m.url for m in masters),
                "--n", "100" if quick else "3000"]
    if scenario in ("rwlock_read_mostly", "rwlock_exclusive"):
        # 90 % reads holding it 100 µs; the same work under the write side alone for comparison.
        return ["--scenario", "rwlock", "--url", server.url,
                "--processes", processes, "--tasks", tasks,
                "--duration-ms", "400" if quick else "5000", "--cs-us", "100", "--read-percent", "90",
                "--exclusive", "1" if scenario == "rwlock_exclusive" else "0"]
    if scenario == "watchdog":
        return ["--scenario", "watchdog", "--url", server.url, "--locks", "500" if quick else "10000",
                "--lease-ms", "3000", "--duration-ms", "1000" if quick else "60000"]
    raise ValueError(scenario)


def server_usage(server):
    """The server's CPU so far (used_cpu_sys + used_cpu_user: the process, all
    its threads), each command's (calls, usec) from INFO commandstats, where
    the calls a script makes count under their own names too, and the error
    replies it has given (INFO stats; those of commands inside scripts too)."""
    cpu, commands, errors = 0.0, {}, 0
    for line in server.cli("INFO", "cpu", "commandstats", "stats").splitlines():
        key, _, value = line.strip().partition(":")
        if key in ("used_cpu_sys", "used_cpu_user"):
            cpu += float(value)
        elif key == "total_error_replies":
            errors = int(value)
        elif key.startswith("cmdstat_"):
            fields = dict(item.split("=", 1) for item in value.split(","))
            commands[key[len("cmdstat_"):]] = (int(fields["calls"]), int(fields["usec"]))
    return {"cpu_seconds": cpu, "commands": commands, "error_replies": errors}


def server_cost(before, after, ops, prefix="server_"):
    """What the server spent between two server_usage()s, per operation: its
    CPU, the time inside scripts (EVALSHA and EVAL, their own calls included)
    and the calls of each command (scripts' own calls included; INFO's left out)."""
    n = max(ops, 1)
    delta = {}
    for name, (calls, usec) in after["commands"].items():
        calls0, usec0 = before["commands"].get(name, (0, 0))
        if calls > calls0 and name != "info":
            delta[name] = (calls - calls0, usec - usec0)
    return {prefix + "cpu_us_per_op": (after["cpu_seconds"] - before["cpu_seconds"]) * 1e6 / n,
            prefix + "error_replies_per_op": (after["error_replies"] - before["error_replies"]) / n,
            prefix + "script_us_per_op": sum(delta.get(k, (0, 0))[1] for k in ("evalsha", "eval")) / n,
            prefix + "calls_per_op": {name: round(calls / n, 4) for name, (calls, _) in sorted(delta.items())}}


def redis_benchmark(port, requests, keys, command):
    """Requests per second redis-benchmark reaches with 64 clients, pipelined 16
    deep, every __rand_int__ drawn from 0..keys-1."""
    result = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "64", "-P", "16", "-n", str(requests),
                             "-r", str(keys), "--csv", *command], capture_output=True, text=True, timeout=120)
    for line in result.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 1 and cells[1].replace(".", "", 1).isdigit() and cells[0] != "test":
            return float(cells[1])
    raise RuntimeError("redis-benchmark gave no figure: " + result.stdout + result.stderr)


def server_capacity(server, quick):
    """redis-benchmark on dlock's acquire and release scripts, pipelined, on the
    paths dlock's many-names run takes: a fresh grant of a free name whose
    fence exists, a final release that writes a new
    tombstone. Reports the server's rate for them, as lock+unlock pairs per
    second (1 / (1/acquire + 1/release)), and its CPU per pair (INFO cpu).

    redis-benchmark draws every __rand_int__ of a command on its own, so one
    command's lock, fence and tombstone are unrelated names: the set-up makes
    each of them what it is in dlock's run. acquire: fences exist for all
    10,000 names (lock_state.lua), and the lock's name takes two draws, so it
    is almost never one granted before. release: a lock held by the owner at
    operation 1 (and its fence) for each of ten times as many names as
    calls, so nearly every call is the first release of its name, and a
    final one. How many calls took those paths is in the report: TIME runs
    once per fresh grant, DEL once per final release (which publishes only
    when someone waited: nobody does here)."""
    scripts = {}
    # As the build embeds them: the shared prelude in front of each script.
    prelude = ""
    for part in ("publish.lua", "prelude.lua"):
        with open(os.path.join(ROOT, "src", "scripts", part)) as f:
            prelude += f.read()
    for name in ("acquire", "release"):
        with open(os.path.join(ROOT, "src", "scripts", name + ".lua")) as f:
            scripts[name] = server.cli("SCRIPT", "LOAD", prelude + f.read()).strip()
    with open(os.path.join(HERE, "lock_state.lua")) as f:
        state = f.read()

    def given(names, held):
        server.cli("FLUSHALL")
        for first in range(0, names, 100000):  # in slices: each EVAL blocks the server while it runs
            server.cli("EVAL", state, "0", str(first), str(min(first + 100000, names) - 1), "held" if held else "")

    n = 3000 if quick else 20000
    names = 10000
    given(names, held=False)
    # The keys and arguments the library sends (lock, fence, the owner's
    # tombstone, the other kinds' keys: readers, semaphore permits and waiters;
    # owner, lease, operation id, mode, retention, token floor, holder).
    before = server_usage(server)
    acquire = redis_benchmark(server.port, n, names, [
        "EVALSHA", scripts["acquire"], "6", "dlock:{__rand_int____rand_int__}", "dlock:{__rand_int__}:fence",
        "dlock:{__rand_int__}:done:owner", "dlock:{__rand_int__}:readers", "dlock:sem:{__rand_int__}",
        "dlock:sem:{__rand_int__}:waiters", "owner", "30000", "1", "fresh", "600000", "1",
        "host=bench pid=1 thread=1"])
    acquire_cost = server_cost(before, server_usage(server), n, prefix="")
    given(10 * n, held=True)
    before = server_usage(server)
    release = redis_benchmark(server.port, n, 10 * n, [
        "EVALSHA", scripts["release"], "4", "dlock:{__rand_int__}", "dlock:{__rand_int__}:fence",
        "dlock:{__rand_int__}:ch", "dlock:{__rand_int__}:done:owner", "owner", "30000", "2", "1", "600000"])
    release_cost = server_cost(before, server_usage(server), n, prefix="")
    server.cli("FLUSHALL")
    return {"acquire_per_s": acquire, "release_per_s": release,
            "lock_unlock_pairs_per_s": 1.0 / (1.0 / acquire + 1.0 / release), "calls_each": n,
            "acquire_server_cpu_us": acquire_cost["cpu_us_per_op"],
            "release_server_cpu_us": release_cost["cpu_us_per_op"],
            "server_cpu_us_per_pair": acquire_cost["cpu_us_per_op"] + release_cost["cpu_us_per_op"],
            "script_us_per_pair": acquire_cost["script_us_per_op"] + release_cost["script_us_per_op"],
            "acquire_fresh_grants": acquire_cost["calls_per_op"].get("time", 0.0),
            "release_final": release_cost["calls_per_op"].get("del", 0.0),
            "acquire_calls_per_op": acquire_cost["calls_per_op"],
            "release_calls_per_op": release_cost["calls_per_op"]}


# The floor: a bare hiredis lock (bench/floor_runner.cpp: SET NX PX, then an
# EVALSHA compare-and-delete, one blocking connection per thread) beside
# dlock, on the same servers in the same run. Each pair runs `repeats` times
# in turns, dlock then the floor; each figure keeps its least value over
# the repeats (a busy machine only ever adds to a cost).
FLOOR_SCENARIOS = [
    ("one_name", "one thread, one name, a reused Lock", ["--scenario", "cycles"]),
    ("lock_per_name", "one thread, a Lock made per name (10,000 names in turn)",
     ["--scenario", "cycles", "--fresh", "1", "--names", "10000"]),
    ("many16", "16 threads over 10,000 names", ["--scenario", "many", "--tasks", "16", "--names", "10000"]),
    ("redlock5", "Redlock over 5 masters", ["--scenario", "cycles"]),
]
# (field, what; the floor's figure is the divisor).
FLOOR_FIGURES = [
    ("client_cpu_us_per_op", "client CPU µs"),
    ("context_switches_per_op", "context switches"),
    ("heap_allocations_per_op", "heap allocations (all)"),
    ("allocations_per_op", "operator new"),
    ("server.cpu_us_per_op", "server CPU µs (INFO cpu)"),
    ("server.command_us_per_op", "server µs inside commands (INFO commandstats)"),
]


def figure(result, field):
    value = result
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def floor_flags(key, server, masters, quick, floor_only):
    flags = next(fl for k, _, fl in FLOOR_SCENARIOS if k == key)[:]
    if key == "many16":
        return flags + ["--url", server.url, "--duration-ms", "400" if quick else ("3000" if floor_only else "5000")]
    n = "300" if quick else ("3000" if key == "redlock5" else "20000")
    flags += ["--url", server.url, "--n", n]
    if key == "redlock5":
        flags += ["--urls", ",".join(m.url for m in masters)]
    return flags


def floor(build, server, masters, quick, floor_only, limit):
    """dlock and the floor, per lock+unlock, and dlock's figures ÷ the floor's."""
    runners = {"dlock": [os.path.join(build, "bench", "dlock_runner"), "--kind", "lock"],
               "floor": [os.path.join(build, "bench", "dlock_floor_runner")]}
    repeats = 1 if quick else 3
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "repeats": repeats, "scenarios": {}}
    for key, what, _ in FLOOR_SCENARIOS:
        runs = {"dlock": [], "floor": []}
        for _ in range(repeats):
            for who, command in runners.items():
                for s in [server] + masters:
                    s.cli("FLUSHALL")
                print("%-32s %s" % ("floor: " + who, key), flush=True)
                try:
                    runs[who].append(run_json(command + floor_flags(key, server, masters, quick, floor_only), limit))
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                    print("  error: %s" % str(e)[-500:], flush=True)
                    runs[who].append({"error": str(e)[-500:]})
        entry = {"what": what}
        for who, results in runs.items():
            good = [r for r in results if "error" not in r]
            if not good:
                entry[who] = results[-1]
                continue
            best = dict(good[0])
            best["server"] = dict(good[0].get("server", {}))
            for field, _ in FLOOR_FIGURES:
                values = [figure(r, field) for r in good if figure(r, field) is not None]
                if values:
                    target, name = (best["server"], field[7:]) if field.startswith("server.") else (best, field)
                    target[name] = min(values)
            best["runs"] = len(good)
            entry[who] = best
        entry["ratios"] = {}
        for field, _ in FLOOR_FIGURES:
            mine, base = figure(entry["dlock"], field), figure(entry["floor"], field)
            if isinstance(mine, (int, float)) and isinstance(base, (int, float)) and base > 0:
                entry["ratios"][field] = mine / base
        out["scenarios"][key] = entry
    print("server capacity: the floor's and dlock's (redis-benchmark)", flush=True)
    out["capacity"] = {"floor": floor_capacity(server, quick), "dlock": server_capacity(server, quick)}
    return out


def floor_capacity(server, quick):
    """The floor's lock+unlock pairs/s on one server, as server_capacity()
    measures dlock's: redis-benchmark (64 clients, pipeline 16) on SET NX PX
    of free names, then on the compare-and-delete of held ones."""
    with open(os.path.join(HERE, "floor_unlock.lua")) as f:
        sha = server.cli("SCRIPT", "LOAD", f.read()).strip()
    with open(os.path.join(HERE, "floor_state.lua")) as f:
        state = f.read()
    n = 3000 if quick else 20000
    server.cli("FLUSHALL")
    acquire = redis_benchmark(server.port, n, 10 * n, ["SET", "floor:{__rand_int__}", "t", "NX", "PX", "30000"])
    server.cli("FLUSHALL")
    for first in range(0, 10 * n, 100000):
        server.cli("EVAL", state, "0", str(first), str(min(first + 100000, 10 * n) - 1))
    before = server_usage(server)
    release = redis_benchmark(server.port, n, 10 * n, ["EVALSHA", sha, "1", "floor:{__rand_int__}", "t"])
    deleted = server_cost(before, server_usage(server), n, prefix="")["calls_per_op"].get("del", 0.0)
    server.cli("FLUSHALL")
    return {"acquire_per_s": acquire, "release_per_s": release,
            "lock_unlock_pairs_per_s": 1.0 / (1.0 / acquire + 1.0 / release), "release_deleted": deleted}


def floor_markdown(report):
    f = report.get("floor")
    if not f:
        return []
    lines = ["", "The floor: a bare hiredis lock (SET NX PX, then an EVALSHA compare-and-delete, one blocking "
             "connection per thread), beside dlock on the same servers (%s; least of %d runs each). Per "
             "lock+unlock, dlock / floor (dlock ÷ floor):" % (f.get("date", "?"), f.get("repeats", 1)), ""]
    lines.append("| scenario | " + " | ".join(text for _, text in FLOOR_FIGURES) + " |")
    lines.append("|---" * (len(FLOOR_FIGURES) + 1) + "|")
    for key, what, _ in FLOOR_SCENARIOS:
        e = f["scenarios"].get(key)
        if not e:
            continue
        cells = []
        for field, _ in FLOOR_FIGURES:
            mine, base = figure(e.get("dlock", {}), field), figure(e.get("floor", {}), field)
            ratio = e.get("ratios", {}).get(field)
            cells.append("%s / %s%s" % (fmt(mine, 2), fmt(base, 2), " (%s×)" % fmt(ratio, 2) if ratio else ""))
        lines.append("| %s | %s |" % (what, " | ".join(cells)))
    capacity = f.get("capacity", {})
    if "floor" in capacity and "dlock" in capacity:
        lines += ["", "Lock+unlock pairs/s one server sustains (redis-benchmark, 64 clients, pipeline 16): dlock's "
                  "scripts %s, the floor's commands %s (%s of its unlocks deleted): %s ×." % (
                      fmt(capacity["dlock"]["lock_unlock_pairs_per_s"]),
                      fmt(capacity["floor"]["lock_unlock_pairs_per_s"]),
                      percent(capacity["floor"].get("release_deleted")),
                      fmt(capacity["dlock"]["lock_unlock_pairs_per_s"] /
                          capacity["floor"]["lock_unlock_pairs_per_s"], 2))]
    return lines


def floor_goals(f):
    """The floor's figures the targets are about, keyed for TARGETS:
    ratio_<scenario>_<figure> (dlock ÷ floor), and each side's own figure as
    dlock_<scenario>_<figure> and floor_<scenario>_<figure>."""
    out = {}
    capacity = (f or {}).get("capacity", {})
    if capacity.get("floor", {}).get("lock_unlock_pairs_per_s") and "dlock" in capacity:
        out["ratio_capacity_pairs"] = (capacity["dlock"]["lock_unlock_pairs_per_s"] /
                                       capacity["floor"]["lock_unlock_pairs_per_s"])
    for key, entry in (f or {}).get("scenarios", {}).items():
        for field, value in entry.get("ratios", {}).items():
            out["ratio_%s_%s" % (key, field.replace("server.", "server_"))] = value
        for who in ("dlock", "floor"):
            for field, _ in FLOOR_FIGURES:
                value = figure(entry.get(who, {}), field)
                if value is not None:
                    out["%s_%s_%s" % (who, key, field.replace("server.", "server_"))] = value
    return out


def versions():
    def out(command):
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
        except OSError:
            return "not found"

    def npm_version(package):
        try:
            with open(os.path.join(PEERS, "node_modules", package, "package.json")) as f:
                return json.load(f)["version"]
        except OSError:
            return "not installed"

    py_redis = out([PYTHON, "-c", "import redis; print(redis.__version__)"])
    return {"redis-server": out(["redis-server", "--version"]), "node": out(["node", "--version"]),
            "python3": out([PYTHON, "--version"]), "redis-py": py_redis, "redlock": npm_version("redlock"),
            "ioredis": npm_version("ioredis"), "redis-semaphore": npm_version("redis-semaphore")}


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def best_peer(results, scenario, field):
    best = None
    for label, by_scenario in results.items():
        if label.startswith("dlock") or scenario not in by_scenario or "error" in by_scenario[scenario]:
            continue
        value = by_scenario[scenario][field]
        if best is None or value > best[1]:
            best = (label, value)
    return best


def contended_goals(results, c, workers, prefix):
    """One dlock kind's contended figures against the best peer's, keys prefixed."""
    out = {}
    if "acq_per_s" not in c:
        return out
    peer = best_peer(results, "contended", "acq_per_s")
    if peer:
        out[prefix + "_acq_over_best_peer"] = c["acq_per_s"] / peer[1]
        out[prefix + "_best_peer"] = peer[0]
    out[prefix + "_wait_p99_ms"] = c["wait_p99_us"] / 1000
    out[prefix + "_wait_max_ms"] = c["wait_max_us"] / 1000
    out[prefix + "_jain"] = c["jain"]
    # Strict FIFO at this throughput: a waiter waits for every other worker's turn.
    if c["acq_per_s"] > 0:
        out[prefix + "_ideal_fifo_wait_ms"] = (workers - 1) / c["acq_per_s"] * 1000
        out[prefix + "_wait_p99_over_ideal_fifo"] = out[prefix + "_wait_p99_ms"] / out[prefix + "_ideal_fifo_wait_ms"]
    return out


def goals(results, capacity, workers):
    """dlock's figures the targets are about, each from this run alone.
    workers: how many contended the one name (processes × threads)."""
    dlock = results["dlock"]
    out = {}
    u = dlock.get("uncontended", {})
    if "p50_us" in u:
        peer = best_peer(results, "uncontended", "ops_per_s")
        if peer:
            out["uncontended_ops_over_best_peer"] = u["ops_per_s"] / peer[1]
            out["uncontended_best_peer"] = peer[0]
        out["uncontended_allocations_per_op"] = u.get("allocations_per_op")
        out["uncontended_context_switches_per_op"] = u.get("context_switches_per_op")
        if "nowait_p50_us" in u:  # lock + unlock without waiting for the reply, once the runner measures it
            out["uncontended_nowait_p50_over_ping_p50"] = u["nowait_p50_us"] / u["ping_p50_us"]
    out["contended_acq_per_s"] = {label: r["contended"]["acq_per_s"] for label, r in results.items()
                                  if "acq_per_s" in r.get("contended", {})}
    # The default lock's contended goals, and the same for the fair lock.
    for prefix, label in (("contended", "dlock"), ("fair_contended", "dlock FairLock")):
        out.update(contended_goals(results, results.get(label, {}).get("contended", {}), workers, prefix))
    m = dlock.get("many", {})
    if "ops_per_s" in m:
        out["many_names_over_server_capacity"] = m["ops_per_s"] / capacity["lock_unlock_pairs_per_s"]
        out["many_context_switches_per_op"] = m.get("context_switches_per_op")
        if m.get("server_cpu_us_per_op") and capacity.get("server_cpu_us_per_pair"):
            out["many_server_cpu_over_redis_benchmark"] = m["server_cpu_us_per_op"] / capacity["server_cpu_us_per_pair"]
    w = dlock.get("watchdog", {})
    if "renewals_over_minimal" in w:
        out["watchdog_renewals_over_minimal"] = w["renewals_over_minimal"]
        out["watchdog_client_cpu_percent"] = w["client_cpu_percent"]
    r = dlock.get("redlock", {})
    if "five_over_single_p50" in r:
        out["redlock5_p50_over_single_p50"] = r["five_over_single_p50"]
        out["redlock5_cpu_over_single"] = r.get("five_over_single_cpu")
        out["redlock5_context_switches_per_op"] = r.get("five_context_switches_per_op")
    mu = dlock.get("multi", {})
    if "three_over_single_p50" in mu:
        out["multi3_p50_over_single_p50"] = mu["three_over_single_p50"]
    rw, rx = dlock.get("rwlock_read_mostly", {}), dlock.get("rwlock_exclusive", {})
    if "acq_per_s" in rw:
        out["rwlock_writer_wait_p99_ms"] = rw["write_wait_p99_us"] / 1000
        if rx.get("acq_per_s"):
            out["rwlock_read_mostly_over_exclusive"] = rw["acq_per_s"] / rx["acq_per_s"]
    return out


# (goal key, comparison, target, what it says; {names} are filled from the
# goals; what a row reads when the run has no figure for it: None leaves the
# row out).
TARGETS = [
    ("contended_acq_over_best_peer", ">=", 2.0,
     "contended (one name, {contended_workers} workers): acquisitions/s ÷ best peer's ({contended_best_peer})", None),
    ("contended_jain", ">=", 0.95, "contended: Jain fairness over the workers", None),
    ("contended_wait_max_ms", "<=", 50.0, "contended: wait max (ms)", None),
    ("contended_wait_p99_over_ideal_fifo", "<=", 3.0,
     "contended: wait p99 ÷ ideal FIFO wait ((workers − 1) ÷ acquisitions/s = {contended_ideal_fifo_wait_ms:.2f} ms)",
     None),
    ("fair_contended_acq_over_best_peer", ">=", 2.0,
     "FairLock contended: acquisitions/s ÷ best peer's ({contended_best_peer})", None),
    ("fair_contended_jain", ">=", 0.95, "FairLock contended: Jain fairness over the workers", None),
    ("fair_contended_wait_max_ms", "<=", 50.0, "FairLock contended: wait max (ms)", None),
    ("fair_contended_wait_p99_over_ideal_fifo", "<=", 3.0,
     "FairLock contended: wait p99 ÷ ideal FIFO wait ({fair_contended_ideal_fifo_wait_ms:.2f} ms)", None),
    ("uncontended_ops_over_best_peer", ">=", 2.5, "uncontended: ops/s ÷ best peer's ({uncontended_best_peer})", None),
    ("uncontended_allocations_per_op", "<=", 8.0, "uncontended: heap allocations per lock+unlock", None),
    ("uncontended_context_switches_per_op", "<=", 6.0, "uncontended: context switches per lock+unlock", None),
    ("uncontended_nowait_p50_over_ping_p50", "<=", 1.6,
     "uncontended: p50 of lock + unlock without waiting for the reply ÷ PING p50",
     "n/a (the runner has no such measurement yet)"),
    ("many_server_cpu_over_redis_benchmark", "<=", 1.25,
     "many names: server CPU per lock+unlock ÷ redis-benchmark's on the same script paths", None),
    ("many_context_switches_per_op", "<=", 3.0, "many names: context switches per lock+unlock", None),
    ("redlock5_cpu_over_single", "<=", 2.5, "Redlock over 5 masters: client CPU per lock+unlock ÷ 1 master's", None),
    ("redlock5_context_switches_per_op", "<=", 8.0, "Redlock over 5 masters: context switches per lock+unlock", None),
    ("watchdog_renewals_over_minimal", "<=", 1.1, "watchdog renewals / minimal", None),
    ("watchdog_client_cpu_percent", "<=", 2.0, "watchdog client CPU (% of a core)", None),
    ("rwlock_read_mostly_over_exclusive", ">=", 2.0, "read-write lock, 90 % reads: acq/s / all exclusive", None),
    ("rwlock_writer_wait_p99_ms", "<=", 50.0, "read-write lock, 90 % reads: writer wait p99 (ms)", None),
    # Against the floor (a bare hiredis lock, same servers, same run).
    ("ratio_one_name_client_cpu_us_per_op", "<=", 2.0, "one name, reused Lock: client CPU ÷ the floor's", None),
    ("ratio_many16_client_cpu_us_per_op", "<=", 2.0, "16 threads over 10,000 names: client CPU ÷ the floor's", None),
    ("dlock_one_name_allocations_per_op", "<=", 8.0, "one name, reused Lock: allocations (operator new)", None),
    ("dlock_lock_per_name_allocations_per_op", "<=", 12.0, "a Lock made per name: allocations (operator new)", None),
    ("dlock_one_name_context_switches_per_op", "<=", 2.5,
     "one name, reused Lock: context switches (floor: {floor_one_name_context_switches_per_op:.2f})", None),
    ("dlock_many16_context_switches_per_op", "<=", 3.0, "16 threads over 10,000 names: context switches", None),
    ("dlock_redlock5_context_switches_per_op", "<=", 6.0,
     "Redlock over 5 masters: context switches (floor: {floor_redlock5_context_switches_per_op:.2f})", None),
    ("ratio_one_name_server_command_us_per_op", "<=", 2.5,
     "one name: server time inside commands ÷ the floor's", None),
    ("ratio_many16_server_command_us_per_op", "<=", 2.5,
     "16 threads over 10,000 names: server time inside commands ÷ the floor's", None),
    ("ratio_capacity_pairs", ">=", 0.4,
     "lock+unlock pairs/s one server sustains ÷ the floor's (redis-benchmark, pipelined)", None),
]


def fmt(value, digits=1):
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if abs(value) >= 1000:
        return "{:,.0f}".format(value)
    return ("{:.%df}" % digits).format(value)


def goal_text(text, goals):
    class Known(dict):
        def __missing__(self, key):
            return "?"

    try:
        return text.format_map(Known(goals))
    except (ValueError, TypeError):  # a "?" where a number was to be formatted
        return text.split(" (")[0]


def cost_cells(r, digits=1):
    """CPU µs / context switches / allocations per operation, for one scenario's result."""
    if not r or "client_cpu_us_per_op" not in r:
        return "—"
    allocations = r.get("allocations_per_op")
    return "%s / %s / %s" % (fmt(r["client_cpu_us_per_op"], digits), fmt(r.get("context_switches_per_op"), 2),
                             fmt(allocations, 1) if allocations is not None else "—")


def markdown(report):
    if not report.get("results"):  # ./run bench --floor with no full report yet: the floor alone
        return "\n".join(floor_markdown(report)[1:] + [""] + target_lines(report)) + "\n"
    results, lines = report["results"], []
    lines.append("| library | uncontended p50 / p99 µs | uncontended ops/s | contended acq/s | wait p50 / p99 / max ms"
                 " | Jain | counter exact | 100 µs CS acq/s | many names ops/s | Redlock 1 → 5 masters p50 µs |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    main_scenarios = ("uncontended", "contended", "contended_cs100", "many", "redlock")
    ok = lambda r, k: {} if "error" in r.get(k, {}) else r.get(k, {})  # noqa: E731
    for label, r in results.items():
        if not any(k in r for k in main_scenarios):
            continue  # a peer measured only in the semaphore's table below
        u, c, c1, m, rl = (ok(r, k) for k in main_scenarios)
        lines.append("| %s | %s / %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s |" % (
            label, fmt(u.get("p50_us")), fmt(u.get("p99_us")), fmt(u.get("ops_per_s")), fmt(c.get("acq_per_s")),
            fmt(c.get("wait_p50_us", 0) / 1000 if c else None), fmt(c.get("wait_p99_us", 0) / 1000 if c else None),
            fmt(c.get("wait_max_us", 0) / 1000 if c else None), fmt(c.get("jain"), 2),
            fmt(c.get("counter_exact")) if c else "—", fmt(c1.get("acq_per_s")), fmt(m.get("ops_per_s")),
            ("%s → %s" % (fmt(rl["single_p50_us"]), fmt(rl["five_p50_us"]))) if "five_p50_us" in rl else "—"))
    lines.append("")
    lines.append("Cost per operation, which a busy machine moves far less than times: client CPU µs / context "
                 "switches / heap allocations (dlock's runner counts them; — for the peers), all threads of the "
                 "library's processes over the measured phase; the server's CPU per lock+unlock in the many-names "
                 "run (INFO cpu before and after).")
    lines.append("")
    lines.append("| library | uncontended, per lock+unlock | contended, per acquisition | many names, per lock+unlock"
                 " | many names: server CPU µs | Redlock 1 → 5 masters: client CPU µs | Redlock 5: context switches |")
    lines.append("|---|---|---|---|---|---|---|")
    for label, r in results.items():
        if not any(k in r for k in main_scenarios):
            continue
        u, c, _, m, rl = (ok(r, k) for k in main_scenarios)
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            label, cost_cells(u), cost_cells(c, 0), cost_cells(m), fmt(m.get("server_cpu_us_per_op")),
            ("%s → %s" % (fmt(rl["single_client_cpu_us_per_op"]), fmt(rl["five_client_cpu_us_per_op"])))
            if "five_client_cpu_us_per_op" in rl else "—", fmt(rl.get("five_context_switches_per_op"), 2)))
    lines.extend(python_table(results, ok))
    semaphores = [(label, r["semaphore"]) for label, r in results.items()
                  if "acq_per_s" in r.get("semaphore", {})]
    if semaphores:
        lines.append("")
        lines.append("| semaphore, 4 permits, 32 workers | acq/s | wait p50 / p99 / max ms | Jain | most holders at once |")
        lines.append("|---|---|---|---|---|")
        for label, sem in semaphores:
            lines.append("| %s | %s | %s / %s / %s | %s | %s |" % (
                label, fmt(sem["acq_per_s"]), fmt(sem["wait_p50_us"] / 1000), fmt(sem["wait_p99_us"] / 1000),
                fmt(sem["wait_max_us"] / 1000), fmt(sem["jain"], 2), sem.get("max_inside", "—")))
    cap = report["server_capacity"]
    lines.append("")
    lines.append("Server capacity for dlock's scripts (redis-benchmark, 64 clients, pipeline 16, on the paths of a "
                 "lock+unlock of a free name: %s of its acquire calls were fresh grants, %s of its release calls "
                 "final releases): acquire %s/s, release %s/s, lock+unlock pairs %s/s." % (
                     percent(cap.get("acquire_fresh_grants")), percent(cap.get("release_final")),
                     fmt(cap["acquire_per_s"]), fmt(cap["release_per_s"]), fmt(cap["lock_unlock_pairs_per_s"])))
    m = ok(results["dlock"], "many")
    if "server_cpu_us_per_op" in m and cap.get("server_cpu_us_per_pair"):
        calls = m.get("server_calls_per_op", {})
        lines.append("")
        lines.append("Server CPU per lock+unlock (INFO cpu): dlock's many names %s µs (per lock+unlock %s script "
                     "calls, %s fresh grants, %s final releases; wall-clock time inside scripts, which preemption "
                     "on a busy machine inflates, %s µs), redis-benchmark on the same script paths %s µs (inside "
                     "scripts %s µs): %s ×." % (
                         fmt(m["server_cpu_us_per_op"], 2), fmt(calls.get("evalsha", 0) + calls.get("eval", 0), 2),
                         fmt(calls.get("time", 0), 2), fmt(calls.get("del", 0), 2),
                         fmt(m.get("server_script_us_per_op"), 2), fmt(cap["server_cpu_us_per_pair"], 2),
                         fmt(cap.get("script_us_per_pair"), 2),
                         fmt(m["server_cpu_us_per_op"] / cap["server_cpu_us_per_pair"], 2)))
    contended_costs = [(label, runs["contended"]) for label, runs in results.items()
                       if "server_cpu_us_per_op" in runs.get("contended", {})]
    if contended_costs:
        lines.append("")
        lines.append("Server per contended acquisition (INFO cpu, commandstats and stats over the run): " + "; ".join(
            "%s %s µs CPU, %s commands, %s error replies" % (
                label, fmt(c["server_cpu_us_per_op"], 1),
                fmt(sum(v for k, v in c.get("server_calls_per_op", {}).items()), 1),
                fmt(c.get("server_error_replies_per_op", 0), 2)) for label, c in contended_costs) + ".")
    mu, mc = (results["dlock"].get(k, {}) for k in ("multi", "multi_contended"))
    if "three_p50_us" in mu:
        lines.append("")
        lines.append("dlock multi-lock, 3 names: lock+unlock p50 %s µs / p99 %s µs (%s ops/s), %s × one name's p50 "
                     "(%s µs); contended, half the processes listing the names in the opposite order: %s acq/s, "
                     "wait p99 %s ms, counter exact: %s." % (
                         fmt(mu["three_p50_us"]), fmt(mu["three_p99_us"]), fmt(mu["three_ops_per_s"]),
                         fmt(mu["three_over_single_p50"], 2), fmt(mu["single_p50_us"]),
                         fmt(mc.get("acq_per_s")), fmt(mc.get("wait_p99_us", 0) / 1000 if mc else None),
                         fmt(mc.get("counter_exact")) if mc else "—"))
    w = results["dlock"].get("watchdog")
    if w and "locks" in w:
        lines.append("")
        lines.append("dlock watchdog: %d held locks, %s renewals/s (%s × the minimum), client CPU %s %% of a core, "
                     "%s heap bytes per held lock." % (w["locks"], fmt(w["renewals_per_s"]),
                                                       fmt(w["renewals_over_minimal"], 2),
                                                       fmt(w["client_cpu_percent"], 2), fmt(w["bytes_per_lock"], 0)))
    rw, rx = results["dlock"].get("rwlock_read_mostly"), results["dlock"].get("rwlock_exclusive")
    if rw and "acq_per_s" in rw:
        lines.append("")
        lines.append("dlock read-write lock, one name, 90 %% reads (100 µs held): %s acquisitions/s (%s reads, %s writes; "
                     "all on the write side: %s/s); writer wait p50 / p99 / max %s / %s / %s ms, reader wait p99 %s ms; "
                     "writers' counter exact: %s." % (
                         fmt(rw["acq_per_s"]), fmt(rw["reads"], 0), fmt(rw["writes"], 0),
                         fmt(rx.get("acq_per_s")) if rx and "acq_per_s" in rx else "—",
                         fmt(rw["write_wait_p50_us"] / 1000, 2), fmt(rw["write_wait_p99_us"] / 1000, 2),
                         fmt(rw["write_wait_max_us"] / 1000, 2), fmt(rw["read_wait_p99_us"] / 1000, 2),
                         fmt(rw["counter_exact"])))
    lines += floor_markdown(report)
    lines.append("")
    lines += target_lines(report)
    return "\n".join(lines) + "\n"


def target_lines(report):
    lines = ["| goal | dlock | target | met |", "|---|---|---|---|"]
    goals_now = dict(report["goals"], contended_workers=report.get("meta", {}).get("contended_workers", "?"))
    for key, op, target, text, missing in TARGETS:
        value = report["goals"].get(key)
        wanted = "%s %s" % (op.replace("<=", "≤").replace(">=", "≥"), target)
        if value is None:
            if missing:
                lines.append("| %s | %s | %s | n/a |" % (goal_text(text, goals_now), missing, wanted))
            continue
        met = value <= target if op == "<=" else value >= target
        lines.append("| %s | %s | %s | %s |" % (goal_text(text, goals_now), fmt(value, 2), wanted, "✔" if met else "✘"))
    return lines


def python_table(results, ok):
    """The Python locks side by side: dlock's module and redis-py's Lock."""
    rows = [(label, r) for label, r in results.items() if label == DLOCK_PYTHON_LABEL or label.startswith("redis-py")]
    if not any(label == DLOCK_PYTHON_LABEL for label, _ in rows):
        return []
    lines = ["", "Python: dlock's module beside redis-py's Lock (one harness, bench/peers/redis_py_runner.py).", "",
             "| Python lock | uncontended lock+unlock/s | client CPU µs per lock+unlock | contended acq/s | Jain "
             "| worst wait ms | counter exact |", "|---|---|---|---|---|---|---|"]
    for label, r in rows:
        u, c = ok(r, "uncontended"), ok(r, "contended")
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            label, fmt(u.get("ops_per_s")), fmt(u.get("client_cpu_us_per_op")), fmt(c.get("acq_per_s")),
            fmt(c.get("jain"), 2), fmt(c.get("wait_max_us", 0) / 1000 if c else None),
            fmt(c.get("counter_exact")) if c else "—"))
    return lines


def percent(fraction):
    return "—" if fraction is None else "%.0f %%" % (100 * fraction)


# One colour per library, the same in every chart: dlock always blue, the
# peers from a fixed palette in the order of their names. A library's
# "(tuned)" configuration keeps its colour and is drawn dashed or hatched.
PALETTE = ["#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def library_of(label):
    return label.split(" (")[0]


def library_colors(labels):
    peers = sorted({library_of(l) for l in labels} - {"dlock"})
    colors = {lib: PALETTE[i % len(PALETTE)] for i, lib in enumerate(peers)}
    colors["dlock"] = "#1f77b4"
    return {l: colors[library_of(l)] for l in labels}


def tuned(label):
    return label.endswith("(tuned)")


def stamp(fig, meta):
    """Says where the figures come from, under every chart."""
    fig.text(0.01, 0.01, "%s · %s · %s run%s" % (meta.get("machine", "?"), meta.get("date", "?"), meta.get("mode", "?"),
                                                   ", commit " + meta["commit"] if meta.get("commit") else ""),
             fontsize=7, color="#555555", ha="left", va="bottom")


def save(fig, ax, meta, path):
    stamp(fig, meta)
    # Room at the bottom for the stamp; legends sit outside the axes, so
    # they never cover data.
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def charts(report, out):
    results = report["results"]
    meta = report.get("meta", {})
    labels = list(results)
    palette = library_colors(labels)
    hatches = {l: "//" if tuned(l) else "" for l in labels}

    def bars(name, title, unit, values, extra=None, higher_better=True):
        fig, ax = plt.subplots(figsize=(9, 4.5))
        shown = [(l, v) for l, v in zip(labels, values) if v is not None]
        ax.barh([s[0] for s in shown], [s[1] for s in shown], color=[palette[s[0]] for s in shown],
                hatch=[hatches[s[0]] for s in shown], edgecolor="white")
        if extra:
            extra(ax)
        ax.set_xlabel(unit + ("  (higher is better →)" if higher_better else "  (← lower is better)"))
        ax.set_title(title)
        ax.invert_yaxis()
        save(fig, ax, meta, os.path.join(out, name))

    def paired_bars(name, title, scenario, pale, full, key, unit, scale=1.0, log=False, marks=()):
        """Two figures per library in its colour: pale for `pale`, full for `full`;
        marks: (x, line style, legend text) reference lines."""
        fig, ax = plt.subplots(figsize=(9, 4.5))
        shown = [l for l in labels if full in results[l].get(scenario, {})]
        ys = range(len(shown))
        ax.barh([y - 0.2 for y in ys], [results[l][scenario][pale] * scale for l in shown], height=0.4,
                color=[palette[l] for l in shown], alpha=0.4, hatch=[hatches[l] for l in shown], edgecolor="white")
        ax.barh([y + 0.2 for y in ys], [results[l][scenario][full] * scale for l in shown], height=0.4,
                color=[palette[l] for l in shown], hatch=[hatches[l] for l in shown], edgecolor="white")
        handles = [Patch(facecolor="#888888", alpha=0.4, label=key[0]), Patch(facecolor="#888888", label=key[1])]
        for x, style, text in marks:
            handles.append(ax.axvline(x, color="#000000", linestyle=style, linewidth=1, label=text))
        if log:
            ax.set_xscale("log")
            # Plain numbers at 1, 2 and 5 of every decade: a log axis alone labels only powers of ten.
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yticks(list(ys))
        ax.set_yticklabels(shown)
        ax.invert_yaxis()
        ax.set_xlabel(unit + "  (← lower is better)")
        ax.set_title(title)
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        save(fig, ax, meta, os.path.join(out, name))

    get = lambda scenario, field: [results[l].get(scenario, {}).get(field) for l in labels]  # noqa: E731
    bars("uncontended.png", "Uncontended lock+unlock, one client", "operations/s", get("uncontended", "ops_per_s"))
    bars("contended.png", "Contended, one name (4 processes × 8 workers, empty critical section)",
         "acquisitions/s", get("contended", "acq_per_s"))
    bars("contended_cs100.png", "Contended, 100 µs critical section", "acquisitions/s",
         get("contended_cs100", "acq_per_s"))
    bars("semaphore.png", "Semaphore of 4 permits, 32 workers (4 processes × 8)", "acquisitions/s",
         get("semaphore", "acq_per_s"))
    capacity = report["server_capacity"]["lock_unlock_pairs_per_s"]
    bars("many_names.png", "64 workers over 10,000 names (line: server capacity for dlock's scripts)",
         "lock+unlock/s", get("many", "ops_per_s"),
         lambda ax: ax.axvline(capacity, color="#000000", linestyle="--", linewidth=1))
    baseline = report["server_capacity"].get("server_cpu_us_per_pair")
    if baseline and any(v is not None for v in get("many", "server_cpu_us_per_op")):
        def baseline_lines(ax):
            ax.axvline(baseline, color="#000000", linestyle="--", linewidth=1, label="redis-benchmark, same scripts")
            ax.axvline(1.25 * baseline, color="#000000", linestyle=":", linewidth=1, label="dlock's target (1.25 ×)")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)

        bars("server_cpu.png", "Server CPU per lock+unlock, 64 workers over 10,000 names",
             "redis-server CPU µs per lock+unlock", get("many", "server_cpu_us_per_op"), baseline_lines,
             higher_better=False)

    # Waits of the contended run: the p99 next to the worst one, on a log
    # scale (they range from a tenth of a millisecond to seconds).
    c = results.get("dlock", {}).get("contended", {})
    workers = meta.get("contended_workers")
    marks = [(50.0, ":", "dlock's target for the max (50 ms)")]
    if workers and c.get("acq_per_s"):
        marks.append((3 * (workers - 1) / c["acq_per_s"] * 1000, "--",
                      "dlock's target for the p99 (3 × ideal FIFO wait at its rate)"))
    paired_bars("contended_wait.png", "Contended, one name (%s workers): how long an acquisition waited" % workers,
                "contended",
                "wait_p99_us", "wait_max_us", ("p99 (pale)", "max (full colour)"), "wait, ms, log scale",
                scale=1e-3, log=True, marks=marks)
    cost_chart(results, labels, palette, hatches, meta, os.path.join(out, "cost.png"))

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label in labels:
        q = results[label].get("uncontended", {}).get("quantiles_us")
        if q:
            ax.plot(q, [i / 2.0 for i in range(len(q))], label=label, color=palette[label],
                    linestyle="--" if tuned(label) else "-", linewidth=2.5 if label == "dlock" else 1.2)
    ax.set_xscale("log")
    ax.set_xlabel("lock+unlock latency, µs, log scale  (← lower is better)")
    ax.set_ylabel("percentile")
    ax.set_title("Uncontended latency distribution")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(True, which="both", alpha=0.3)
    save(fig, ax, meta, os.path.join(out, "latency.png"))

    paired_bars("redlock.png", "One master vs Redlock over five", "redlock", "single_p50_us", "five_p50_us",
                ("1 master (pale)", "Redlock, 5 masters (full colour)"), "lock+unlock p50, µs")


def cost_chart(results, labels, palette, hatches, meta, path):
    """Client CPU and context switches per operation, one panel per scenario:
    what each library's own processes spent, whatever the machine's load."""
    scenarios = [("uncontended", "uncontended, per lock+unlock"), ("contended", "contended, per acquisition"),
                 ("many", "many names, per lock+unlock")]
    figures = [("client_cpu_us_per_op", "client CPU, µs"), ("context_switches_per_op", "context switches")]
    labels = [l for l in labels if any(s in results[l] for s, _ in scenarios)]
    fig, axes = plt.subplots(len(figures), len(scenarios), figsize=(13, 6.5), sharey=True)
    ys = list(range(len(labels)))
    for col, (scenario, title) in enumerate(scenarios):
        for row, (field, unit) in enumerate(figures):
            ax = axes[row][col]
            shown = [(y, l) for y, l in zip(ys, labels) if results[l].get(scenario, {}).get(field) is not None]
            ax.barh([y for y, _ in shown], [results[l][scenario][field] for _, l in shown],
                    color=[palette[l] for _, l in shown], hatch=[hatches[l] for _, l in shown], edgecolor="white")
            ax.set_xlabel(unit + "  (← lower is better)", fontsize=8)
            if row == 0:
                ax.set_title(title, fontsize=9)
            ax.tick_params(labelsize=7)
    axes[0][0].set_yticks(ys)
    axes[0][0].set_yticklabels(labels)
    axes[0][0].invert_yaxis()
    fig.suptitle("Cost per operation in the library's own processes (all threads)")
    save(fig, None, meta, path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build")
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--floor", action="store_true",
                        help="only dlock beside the floor (a bare hiredis lock): updates the floor's part of "
                             "DIR/compare.json and compare.md, keeping the rest of an earlier report")
    parser.add_argument("--charts-from", metavar="COMPARE_JSON",
                        help="only write compare.md and draw the charts again from an earlier report (its "
                             "machine, date and run), measuring nothing")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.charts_from:
        with open(args.charts_from) as f:
            report = json.load(f)
        with open(os.path.join(args.out, "compare.md"), "w") as f:
            f.write(markdown(report))
        charts(report, args.out)
        return 0
    if not args.build:
        parser.error("--build is required (unless --charts-from)")
    if args.floor:
        return floor_only(args)
    servers = []
    try:
        server = Server()
        masters = [Server() for _ in range(5)]
        servers = [server] + masters
        processes, tasks = contended_shape(args.quick)
        report = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "machine": "%s %s, %d cores" % (platform.system(), platform.machine(), os.cpu_count()),
                           "mode": "quick" if args.quick else "full", "versions": versions(),
                           "commit": git_commit(),
                           "lease_ms": 30000, "contended_workers": processes * tasks},
                  "results": {}}
        print("server capacity (redis-benchmark)", flush=True)
        report["server_capacity"] = server_capacity(server, args.quick)
        limit = 120 if args.quick else 600
        for label, command, scenarios in libraries(args.build, args.quick):
            report["results"][label] = {}
            for scenario in scenarios:
                for s in servers:
                    s.cli("FLUSHALL")
                print("%-32s %s" % (label, scenario), flush=True)
                before = server_usage(server)
                try:
                    value = run_json(command + scenario_flags(scenario, server, masters, args.quick), limit)
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                    value = {"error": str(e)[-500:]}
                    print("  error: %s" % value["error"], flush=True)
                if scenario == "many" and "ops" in value:
                    # The whole run, set-up included: a few commands next to
                    # the seconds of lock+unlock after it.
                    value.update(server_cost(before, server_usage(server), value["ops"]))
                elif scenario == "contended" and "acquisitions" in value:
                    # Per acquisition, the same way: where a hand-over's server
                    # work goes (a notice, a wait in line), and its error replies.
                    value.update(server_cost(before, server_usage(server), value["acquisitions"]))
                report["results"][label][scenario] = value
        report["results"][CLUSTER_LABEL] = {"many": many_on_cluster(args.build, args.quick, limit)}
        report["floor"] = floor(args.build, server, masters, args.quick, False, limit)
        report["goals"] = goals(report["results"], report["server_capacity"], processes * tasks)
        report["goals"].update(floor_goals(report["floor"]))
    finally:
        for s in servers:
            s.stop()
    table = write_report(report, args.out)
    charts(report, args.out)
    print(table)
    failed = [label for label, r in report["results"].items() for s, v in r.items() if "error" in v]
    if failed:
        print("runs that failed: %s" % ", ".join(sorted(set(failed))), file=sys.stderr)
        return 1
    missing = missing_counters(report)
    if missing:
        print("counters missing or out of range: %s" % "; ".join(missing), file=sys.stderr)
        return 1
    return 0


def write_report(report, out):
    """DIR/compare.json and compare.md; the markdown, returned."""
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump(report, f, indent=1)
    table = markdown(report)
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write(table)
    return table


def floor_only(args):
    """./run bench --floor: dlock beside the floor, written into the report
    already in args.out (or a report of its own)."""
    path = os.path.join(args.out, "compare.json")
    report = {"meta": {}, "results": {}, "goals": {}}
    if os.path.exists(path):
        with open(path) as f:
            report = json.load(f)
    servers = []
    try:
        server = Server()
        masters = [Server() for _ in range(5)]
        servers = [server] + masters
        report["floor"] = floor(args.build, server, masters, args.quick, True, 120 if args.quick else 300)
    finally:
        for s in servers:
            s.stop()
    report["goals"] = {k: v for k, v in report.get("goals", {}).items()
                       if not k.startswith(("floor_", "dlock_", "ratio_"))}
    report["goals"].update(floor_goals(report["floor"]))
    write_report(report, args.out)
    print("\n".join(floor_markdown(report)))
    problems = floor_problems(report)
    if problems:
        print("floor: %s" % "; ".join(problems), file=sys.stderr)
        return 1
    return 0


def floor_problems(report):
    """What the floor's comparison needs from any run, never a timing."""
    problems = []
    for key, _, _ in FLOOR_SCENARIOS:
        entry = report.get("floor", {}).get("scenarios", {}).get(key, {})
        for who in ("dlock", "floor"):
            r = entry.get(who, {})
            if "error" in r or not r:
                problems.append("%s %s failed" % (who, key))
                continue
            for field in ("client_cpu_us_per_op", "context_switches_per_op", "server.cpu_us_per_op",
                          "server.command_us_per_op"):
                value = figure(r, field)
                if not isinstance(value, (int, float)) or value < 0:
                    problems.append("%s %s %s = %r" % (who, key, field, value))
            if figure(r, "client_cpu_us_per_op") == 0:
                problems.append("%s %s spent no CPU" % (who, key))
        if "client_cpu_us_per_op" not in entry.get("ratios", {}):
            problems.append("no ratio to the floor for %s" % key)
    return problems


def missing_counters(report):
    """What the cost figures need and a run of any length gives, never a
    timing: every counter present, none negative, CPU spent wherever
    something ran, and dlock's allocation counter counting."""
    results, problems = report["results"], []

    def check(where, r, field, positive=False):
        value = r.get(field)
        if not isinstance(value, (int, float)) or value < 0 or (positive and value <= 0):
            problems.append("%s %s = %r" % (where, field, value))

    per_op = ("client_cpu_us_per_op", "context_switches_per_op")
    for label, by_scenario in results.items():
        for scenario in ("uncontended", "contended", "contended_cs100", "many"):
            if scenario in by_scenario:
                for field in per_op:
                    check("%s %s" % (label, scenario), by_scenario[scenario], field, field == per_op[0])
        if "many" in by_scenario:
            check("%s many" % label, by_scenario["many"], "server_cpu_us_per_op", positive=True)
        if "five_p50_us" in by_scenario.get("redlock", {}):
            for prefix in ("single_", "five_"):
                for field in per_op:
                    check("%s redlock" % label, by_scenario["redlock"], prefix + field, field == per_op[0])
    dlock = results.get("dlock", {})
    allocations = 0.0
    for scenario in ("uncontended", "contended", "many"):
        if scenario in dlock:
            check("dlock %s" % scenario, dlock[scenario], "allocations_per_op")
            allocations += dlock[scenario].get("allocations_per_op") or 0
    if allocations <= 0:
        problems.append("dlock's allocation counter counted nothing")
    cap = report["server_capacity"]
    check("redis-benchmark", cap, "server_cpu_us_per_pair", positive=True)
    return problems + floor_problems(report)


if __name__ == "__main__":
    sys.exit(main())
