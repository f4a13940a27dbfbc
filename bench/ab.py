"""Alternated A/B runs of the uncontended lock+unlock, in one run so that the
machine's load hits both sides alike; the medians of the load-independent
counts (client CPU, context switches, heap allocations per lock+unlock) and
p50 latency, and their ratio.

Used by metrics_ab.py (one binary, metrics on and off) and runner_ab.py (two
builds of the runner, before and after a change)."""

import json
import statistics
import subprocess
import sys
import os

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "faults"))
from infra import RedisServer  # noqa: E402

FIELDS = ("client_cpu_us_per_op", "context_switches_per_op", "allocations_per_op", "p50_us")


def uncontended(runner, url, n, extra=()):
    out = subprocess.run([runner, "--kind", "lock", "--scenario", "uncontended", "--url", url, "--n", str(n), *extra],
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def alternate(sides, rounds, label):
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
                print(f"round {i + 1} {label} {name:6}", {k: value.get(k) for k in FIELDS}, flush=True)
    finally:
        server.close()
    summary = {}
    for field in FIELDS:
        first = statistics.median(r[field] for r in results[a])
        second = statistics.median(r[field] for r in results[b])
        summary[field] = {a: first, b: second, "ratio": first / second if second else None}
    return summary
