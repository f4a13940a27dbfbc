"""What the metrics cost: the uncontended lock+unlock with the client's
metrics on and off, alternated in one run (ab.py). Ratio is on / off.

    python3 bench/metrics_ab.py [BUILD_DIR] [ROUNDS] [N]   (default build/default, 4, 20000)
"""

import json
import os
import sys

from ab import HERE, alternate, uncontended


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "release")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    runner = os.path.join(build, "bench", "dlock_runner")
    summary = alternate({"on": lambda url: uncontended(runner, url, n, ("--metrics", "on")),
                         "off": lambda url: uncontended(runner, url, n, ("--metrics", "off"))}, rounds, "metrics")
    print(json.dumps({"metrics_ab": summary, "rounds": rounds, "n": n}, indent=1))


if __name__ == "__main__":
    main()
