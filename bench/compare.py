"""dlock next to other Redis lock libraries, in one run, on the same servers.

    /usr/bin/python3 bench/compare.py --build BUILD_DIR --out DIR [--quick]

Starts private redis-server processes (one for the single-server scenarios,
five masters for Redlock) on free loopback ports, runs every library's runner
(bench/dlock_runner.cpp, bench/peers/*) for every scenario, measures the
server's own capacity for dlock's scripts with redis-benchmark, and writes
DIR/compare.json, DIR/compare.md and DIR/*.png. Every run has a time limit;
the servers are stopped by pid at the end.
"""
import argparse
import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

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


def run_json(command, limit):
    """Runs one runner; its last stdout line is its JSON result."""
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True, timeout=limit, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(command[:6]), result.returncode, result.stderr[-2000:]))
    value = json.loads(result.stdout.strip().splitlines()[-1])
    value["run_seconds"] = round(time.time() - started, 2)
    return value


def libraries(build, quick):
    """(label, runner command prefix, scenarios it supports)."""
    dlock = [os.path.join(build, "bench", "dlock_runner")]
    node = ["node", os.path.join(PEERS, "node_runner.js")]
    py = [PYTHON, os.path.join(PEERS, "redis_py_runner.py")]
    out = [("dlock", dlock, ["uncontended", "contended", "contended_cs100", "many", "redlock", "watchdog", "multi",
                             "multi_contended", "semaphore", "rwlock_read_mostly", "rwlock_exclusive"])]
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


def scenario_flags(scenario, server, masters, quick):
    if scenario == "uncontended":
        return ["--scenario", "uncontended", "--url", server.url, "--n", "300" if quick else "10000"]
    if scenario in ("contended", "contended_cs100"):
        return ["--scenario", "contended", "--url", server.url,
                "--processes", "2" if quick else "4", "--tasks", "2" if quick else "8",
                "--duration-ms", "400" if quick else "5000", "--cs-us", "100" if scenario == "contended_cs100" else "0"]
    if scenario == "semaphore":
        # A semaphore of 4 permits, 32 workers (4 processes × 8).
        return ["--scenario", "contended", "--url", server.url, "--permits", "4",
                "--processes", "2" if quick else "4", "--tasks", "2" if quick else "8",
                "--duration-ms", "400" if quick else "5000", "--cs-us", "0"]
    if scenario == "many":
        return ["--scenario", "many", "--url", server.url, "--tasks", "64", "--names", "10000",
                "--duration-ms", "400" if quick else "5000"]
    if scenario == "multi":
        return ["--scenario", "multi", "--url", server.url, "--n", "200" if quick else "5000"]
    if scenario == "multi_contended":
        return ["--scenario", "multi_contended", "--url", server.url, "--processes", "2" if quick else "4",
                "--tasks", "2" if quick else "8", "--duration-ms", "400" if quick else "5000", "--cs-us", "0"]
    if scenario == "redlock":
        return ["--scenario", "redlock", "--url", server.url, "--urls", ",".join(m.url for m in masters),
                "--n", "100" if quick else "3000"]
    if scenario in ("rwlock_read_mostly", "rwlock_exclusive"):
        # 90 % reads holding it 100 µs; the same work under the write side alone for comparison.
        return ["--scenario", "rwlock", "--url", server.url,
                "--processes", "2" if quick else "4", "--tasks", "2" if quick else "8",
                "--duration-ms", "400" if quick else "5000", "--cs-us", "100", "--read-percent", "90",
                "--exclusive", "1" if scenario == "rwlock_exclusive" else "0"]
    if scenario == "watchdog":
        return ["--scenario", "watchdog", "--url", server.url, "--locks", "500" if quick else "10000",
                "--lease-ms", "3000", "--duration-ms", "1000" if quick else "60000"]
    raise ValueError(scenario)


def redis_benchmark(port, requests, command):
    """Requests per second redis-benchmark reaches with 64 clients, pipelined 16 deep."""
    result = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "64", "-P", "16", "-n", str(requests),
                             "-r", "10000", "--csv", *command], capture_output=True, text=True, timeout=120)
    for line in result.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 1 and cells[1].replace(".", "", 1).isdigit() and cells[0] != "test":
            return float(cells[1])
    raise RuntimeError("redis-benchmark gave no figure: " + result.stdout + result.stderr)


def server_capacity(server, quick):
    """The server's own rate for dlock's acquire and release scripts (random names,
    pipelined), as lock+unlock pairs per second: 1 / (1/acquire + 1/release)."""
    scripts = {}
    # As the build embeds them: the shared prelude in front of each script.
    with open(os.path.join(ROOT, "src", "scripts", "prelude.lua")) as f:
        prelude = f.read()
    for name in ("acquire", "release"):
        with open(os.path.join(ROOT, "src", "scripts", name + ".lua")) as f:
            scripts[name] = server.cli("SCRIPT", "LOAD", prelude + f.read()).strip()
    n = 20000 if quick else 400000
    # The keys and arguments the library sends (lock, fence, the owner's
    # tombstone; owner, lease, operation id, mode, retention, token floor).
    acquire = redis_benchmark(server.port, n, ["EVALSHA", scripts["acquire"], "3", "dlock:{__rand_int__}",
                                               "dlock:{__rand_int__}:fence", "dlock:{__rand_int__}:done:owner",
                                               "owner", "30000", "__rand_int__", "fresh", "600000", "1"])
    release = redis_benchmark(server.port, n, ["EVALSHA", scripts["release"], "4", "dlock:{__rand_int__}",
                                               "dlock:{__rand_int__}:fence", "dlock:{__rand_int__}:ch",
                                               "dlock:{__rand_int__}:done:owner", "owner", "30000", "__rand_int__",
                                               "all", "600000"])
    server.cli("FLUSHALL")
    return {"acquire_per_s": acquire, "release_per_s": release,
            "lock_unlock_pairs_per_s": 1.0 / (1.0 / acquire + 1.0 / release)}


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
        if label == "dlock" or scenario not in by_scenario or "error" in by_scenario[scenario]:
            continue
        value = by_scenario[scenario][field]
        if best is None or value > best[1]:
            best = (label, value)
    return best


def goals(results, capacity):
    dlock = results["dlock"]
    out = {}
    u = dlock.get("uncontended", {})
    if "p50_us" in u:
        out["uncontended_p50_over_ping_p50"] = u["p50_us"] / u["ping_p50_us"]
        peer = best_peer(results, "uncontended", "ops_per_s")
        if peer:
            out["uncontended_ops_over_best_peer"] = u["ops_per_s"] / peer[1]
            out["uncontended_best_peer"] = peer[0]
    out["contended_acq_per_s"] = {label: r["contended"]["acq_per_s"] for label, r in results.items()
                                  if "acq_per_s" in r.get("contended", {})}
    c = dlock.get("contended", {})
    if "acq_per_s" in c:
        peer = best_peer(results, "contended", "acq_per_s")
        if peer:
            out["contended_acq_over_best_peer"] = c["acq_per_s"] / peer[1]
            out["contended_best_peer"] = peer[0]
        out["contended_wait_p99_ms"] = c["wait_p99_us"] / 1000
        out["contended_wait_max_ms"] = c["wait_max_us"] / 1000
        out["contended_jain"] = c["jain"]
    m = dlock.get("many", {})
    if "ops_per_s" in m:
        out["many_names_over_server_capacity"] = m["ops_per_s"] / capacity["lock_unlock_pairs_per_s"]
    w = dlock.get("watchdog", {})
    if "renewals_over_minimal" in w:
        out["watchdog_renewals_over_minimal"] = w["renewals_over_minimal"]
        out["watchdog_client_cpu_percent"] = w["client_cpu_percent"]
    r = dlock.get("redlock", {})
    if "five_over_single_p50" in r:
        out["redlock5_p50_over_single_p50"] = r["five_over_single_p50"]
    mu = dlock.get("multi", {})
    if "three_over_single_p50" in mu:
        out["multi3_p50_over_single_p50"] = mu["three_over_single_p50"]
    rw, rx = dlock.get("rwlock_read_mostly", {}), dlock.get("rwlock_exclusive", {})
    if "acq_per_s" in rw:
        out["rwlock_writer_wait_p99_ms"] = rw["write_wait_p99_us"] / 1000
        if rx.get("acq_per_s"):
            out["rwlock_read_mostly_over_exclusive"] = rw["acq_per_s"] / rx["acq_per_s"]
    return out


TARGETS = [
    ("uncontended_p50_over_ping_p50", "<=", 2.2, "uncontended p50 / PING p50"),
    ("uncontended_ops_over_best_peer", ">=", 1.3, "uncontended ops/s / best peer's"),
    ("contended_acq_over_best_peer", ">=", 2.0, "contended acquisitions/s / best peer's"),
    ("contended_wait_p99_ms", "<=", 5.0, "contended wait p99 (ms)"),
    ("contended_wait_max_ms", "<=", 50.0, "contended wait max (ms)"),
    ("contended_jain", ">=", 0.9, "contended Jain fairness"),
    ("many_names_over_server_capacity", ">=", 0.8, "many names / server capacity"),
    ("watchdog_renewals_over_minimal", "<=", 1.1, "watchdog renewals / minimal"),
    ("watchdog_client_cpu_percent", "<=", 2.0, "watchdog client CPU (% of a core)"),
    ("redlock5_p50_over_single_p50", "<=", 1.5, "Redlock 5 masters p50 / single master p50"),
    ("rwlock_read_mostly_over_exclusive", ">=", 2.0, "read-write lock, 90 % reads: acq/s / all exclusive"),
    ("rwlock_writer_wait_p99_ms", "<=", 50.0, "read-write lock, 90 % reads: writer wait p99 (ms)"),
]


def fmt(value, digits=1):
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if abs(value) >= 1000:
        return "{:,.0f}".format(value)
    return ("{:.%df}" % digits).format(value)


def markdown(report):
    results, lines = report["results"], []
    lines.append("| library | uncontended p50 / p99 µs | uncontended ops/s | contended acq/s | wait p50 / p99 / max ms"
                 " | Jain | counter exact | 100 µs CS acq/s | many names ops/s | Redlock 1 → 5 masters p50 µs |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    main_scenarios = ("uncontended", "contended", "contended_cs100", "many", "redlock")
    for label, r in results.items():
        if not any(k in r for k in main_scenarios):
            continue  # a peer measured only in the semaphore's table below
        u, c, c1, m, rl = ({} if "error" in r.get(k, {}) else r.get(k, {})
                           for k in ("uncontended", "contended", "contended_cs100", "many", "redlock"))
        lines.append("| %s | %s / %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s |" % (
            label, fmt(u.get("p50_us")), fmt(u.get("p99_us")), fmt(u.get("ops_per_s")), fmt(c.get("acq_per_s")),
            fmt(c.get("wait_p50_us", 0) / 1000 if c else None), fmt(c.get("wait_p99_us", 0) / 1000 if c else None),
            fmt(c.get("wait_max_us", 0) / 1000 if c else None), fmt(c.get("jain"), 2),
            fmt(c.get("counter_exact")) if c else "—", fmt(c1.get("acq_per_s")), fmt(m.get("ops_per_s")),
            ("%s → %s" % (fmt(rl["single_p50_us"]), fmt(rl["five_p50_us"]))) if "five_p50_us" in rl else "—"))
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
    lines.append("Server capacity for dlock's scripts (redis-benchmark, 64 clients, pipeline 16, random names): "
                 "acquire %s/s, release %s/s, lock+unlock pairs %s/s." % (
                     fmt(cap["acquire_per_s"]), fmt(cap["release_per_s"]), fmt(cap["lock_unlock_pairs_per_s"])))
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
    if w:
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
    lines.append("")
    lines.append("| goal | dlock | target | met |")
    lines.append("|---|---|---|---|")
    for key, op, target, text in TARGETS:
        value = report["goals"].get(key)
        if value is None:
            continue
        met = value <= target if op == "<=" else value >= target
        lines.append("| %s | %s | %s %s | %s |" % (text, fmt(value, 2), op.replace("<=", "≤").replace(">=", "≥"),
                                                   target, "✔" if met else "✘"))
    return "\n".join(lines) + "\n"


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

    def bars(name, title, unit, values, extra=None):
        fig, ax = plt.subplots(figsize=(9, 4.5))
        shown = [(l, v) for l, v in zip(labels, values) if v is not None]
        ax.barh([s[0] for s in shown], [s[1] for s in shown], color=[palette[s[0]] for s in shown],
                hatch=[hatches[s[0]] for s in shown], edgecolor="white")
        if extra:
            extra(ax)
        ax.set_xlabel(unit + "  (higher is better →)")
        ax.set_title(title)
        ax.invert_yaxis()
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

    fig, ax = plt.subplots(figsize=(9, 4.5))
    shown = [l for l in labels if "five_p50_us" in results[l].get("redlock", {})]
    ys = range(len(shown))
    # Each library in its colour: pale for one master, full for five.
    ax.barh([y - 0.2 for y in ys], [results[l]["redlock"]["single_p50_us"] for l in shown], height=0.4,
            color=[palette[l] for l in shown], alpha=0.4, hatch=[hatches[l] for l in shown], edgecolor="white")
    ax.barh([y + 0.2 for y in ys], [results[l]["redlock"]["five_p50_us"] for l in shown], height=0.4,
            color=[palette[l] for l in shown], hatch=[hatches[l] for l in shown], edgecolor="white")
    key = [Patch(facecolor="#888888", alpha=0.4, label="1 master (pale)"),
           Patch(facecolor="#888888", label="Redlock, 5 masters (full colour)")]
    ax.set_yticks(list(ys))
    ax.set_yticklabels(shown)
    ax.invert_yaxis()
    ax.set_xlabel("lock+unlock p50, µs  (← lower is better)")
    ax.set_title("One master vs Redlock over five")
    ax.legend(handles=key, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    save(fig, ax, meta, os.path.join(out, "redlock.png"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build")
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--charts-from", metavar="COMPARE_JSON",
                        help="only draw the charts again from an earlier report (its machine, date and run)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.charts_from:
        with open(args.charts_from) as f:
            charts(json.load(f), args.out)
        return 0
    if not args.build:
        parser.error("--build is required (unless --charts-from)")
    servers = []
    try:
        server = Server()
        masters = [Server() for _ in range(5)]
        servers = [server] + masters
        report = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "machine": "%s %s, %d cores" % (platform.system(), platform.machine(), os.cpu_count()),
                           "mode": "quick" if args.quick else "full", "versions": versions(),
                           "commit": git_commit(),
                           "lease_ms": 30000},
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
                try:
                    value = run_json(command + scenario_flags(scenario, server, masters, args.quick), limit)
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                    value = {"error": str(e)[-500:]}
                    print("  error: %s" % value["error"], flush=True)
                report["results"][label][scenario] = value
        report["goals"] = goals(report["results"], report["server_capacity"])
    finally:
        for s in servers:
            s.stop()
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(report, f, indent=1)
    table = markdown(report)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(table)
    charts(report, args.out)
    print(table)
    failed = [label for label, r in report["results"].items() for s, v in r.items() if "error" in v]
    if failed:
        print("runs that failed: %s" % ", ".join(sorted(set(failed))), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
