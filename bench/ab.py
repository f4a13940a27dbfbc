"""Alternated A/B runs of the uncontended lock+unlock (or of one name
contended by 4 processes x 8 threads), in one run so that the machine's load
hits both sides alike; the medians of the load-independent counts (client
CPU, context switches, heap allocations per operation; for the contended
run, the server's CPU and its time inside scripts per acquisition too), of
p50 latency or acquisitions/s, and their ratio.

Used by metrics_ab.py (one binary, metrics on and off) and runner_ab.py (two
builds of the runner, before and after a change)."""

import json
import statistics
import subprocess
import sys
import os

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "faults"))
from infra import RedisServer, command  # noqa: E402

FIELDS = ("client_cpu_us_per_op", "context_switches_per_op", "allocations_per_op", "p50_us")
CONTENDED_FIELDS = ("acq_per_s", "client_cpu_us_per_op", "context_switches_per_op", "server_cpu_us_per_op",
                    "script_us_per_op", "wait_max_us")


def uncontended(runner, url, n, extra=()):
    out = subprocess.run([runner, "--kind", "lock", "--scenario", "uncontended", "--url", url, "--n", str(n), *extra],
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def server_figures(url):
    """The server's CPU seconds so far (INFO cpu) and its microseconds inside
    scripts (INFO commandstats: EVALSHA and EVAL, their commands included)."""
    port = int(url.rsplit(":", 1)[1])
    figures = {"cpu_s": 0.0, "script_us": 0}
    for line in command(port, "INFO", "cpu").decode().splitlines():
        if line.startswith(("used_cpu_sys:", "used_cpu_user:")):
            figures["cpu_s"] += float(line.split(":")[1])
    for line in command(port, "INFO", "commandstats").decode().splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
            figures["script_us"] += int(line.split("usec=")[1].split(",")[0])
    return figures


def contended(runner, url, kind, seconds):
    """One name, 4 processes x 8 threads, no work inside the hold: the
    runner's figures, with the server's CPU and script time per acquisition."""
    before = server_figures(url)
    out = subprocess.run([runner, "--kind", kind, "--scenario", "contended", "--processes", "4", "--tasks", "8",
                          "--cs-us", "0", "--duration-ms", str(int(seconds * 1000)), "--url", url],
                         capture_output=True, text=True, timeout=600, check=True)
    after = server_figures(url)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    acquisitions = max(result["acquisitions"], 1)
    result["server_cpu_us_per_op"] = (after["cpu_s"] - before["cpu_s"]) * 1e6 / acquisitions
    result["script_us_per_op"] = (after["script_us"] - before["script_us"]) / acquisitions
    return result


def alternate(sides, rounds, label, fields=FIELDS):
    """sides: {name: fn(url) -> result}, exactly two; returns the summary."""
    (a, run_a), (b, run_b) = sides.items()
    server = RedisServer()
    results = {a: [], b: []}
    try:
        for i in range(rounds):
            # Alternate which goes first, so neither always follows the other.
            for name, fn in ((a, run_a), (b, run_b)) if i % 2 == 0 else ((b, run_b), (a, run_a)):
                value = fn(server.url())
                results[name].append(value)
                print(f"round {i + 1} {label} {name:6}", {k: value.get(k) for k in fields}, flush=True)
    finally:
        server.close()
    summary = {}
    for field in fields:
        first = statistics.median(r[field] for r in results[a])
        second = statistics.median(r[field] for r in results[b])
        summary[field] = {a: first, b: second, "ratio": first / second if second else None}
    return summary
