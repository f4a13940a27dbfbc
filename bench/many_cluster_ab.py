"""The many-names scenario on one server and on a 3-master cluster (each
master with a replica), alternated in one run so that the machine's load
hits both alike: what a cluster costs the client per lock+unlock.

    python3 bench/many_cluster_ab.py [BUILD_DIR] [ROUNDS]   (default build/default, 2)
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "faults"))
from infra import RedisServer  # noqa: E402
from topologies import ClusterSet  # noqa: E402

FIELDS = ("ops_per_s", "client_cpu_us_per_op", "context_switches_per_op", "allocations_per_op")


def run(runner, url):
    out = subprocess.run([runner, "--kind", "lock", "--scenario", "many", "--url", url, "--tasks", "64", "--names",
                          "10000", "--duration-ms", "5000"], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "release")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    runner = os.path.join(build, "bench", "dlock_runner")
    single, cluster = RedisServer(), ClusterSet()
    try:
        for _ in range(rounds):
            for label, url in (("one server", single.url()), ("3-master cluster", cluster.url())):
                value = run(runner, url)
                print(label, {k: value.get(k) for k in FIELDS}, flush=True)
    finally:
        single.close()
        cluster.close()


if __name__ == "__main__":
    main()
