"""What the metrics cost: the uncontended lock+unlock with the client's
metrics on and off, alternated in one run so that the machine's load hits
both alike. Reports client CPU, context switches and heap allocations per
lock+unlock (load-independent counts) and p50 latency, per round and as the
median ratio on/off.

    python3 bench/metrics_ab.py [BUILD_DIR] [ROUNDS] [N]   (default build/release, 4, 20000)
"""

import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "faults"))
from infra import RedisServer  # noqa: E402

FIELDS = ("client_cpu_us_per_op", "context_switches_per_op", "allocations_per_op", "p50_us")


def run(runner, url, metrics, n):
    out = subprocess.run([runner, "--kind", "lock", "--scenario", "uncontended", "--url", url, "--n", str(n),
                          "--metrics", metrics], capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "release")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    runner = os.path.join(build, "bench", "dlock_runner")
    server = RedisServer()
    results = {"on": [], "off": []}
    try:
        for i in range(rounds):
            # Alternate which goes first, so neither always follows the other.
            for metrics in (("on", "off") if i % 2 == 0 else ("off", "on")):
                value = run(runner, server.url(), metrics, n)
                results[metrics].append(value)
                print(f"round {i + 1} metrics {metrics:3}", {k: value.get(k) for k in FIELDS}, flush=True)
    finally:
        server.close()
    summary = {}
    for field in FIELDS:
        on = statistics.median(r[field] for r in results["on"])
        off = statistics.median(r[field] for r in results["off"])
        summary[field] = {"on": on, "off": off, "ratio": on / off if off else None}
    print(json.dumps({"metrics_ab": summary, "rounds": rounds, "n": n}, indent=1))


if __name__ == "__main__":
    main()
