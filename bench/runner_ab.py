"""Before and after a change: the uncontended lock+unlock of two builds of
bench/dlock_runner, alternated in one run (ab.py). Ratio is after / before.

    python3 bench/runner_ab.py BEFORE_RUNNER AFTER_RUNNER [ROUNDS] [N]   (default 6, 20000)

Or one name contended by 4 processes x 8 threads (lock, fair, rw, ...: the
runner's --kind), each round SECONDS long:

    python3 bench/runner_ab.py --contended KIND BEFORE_RUNNER AFTER_RUNNER [ROUNDS] [SECONDS]   (default 5, 4)

Build the old side from a worktree of the older commit, for example
    git worktree add /tmp/before <commit>
    cmake -S /tmp/before -B /tmp/before/build -DCMAKE_BUILD_TYPE=Release && make -C /tmp/before/build dlock_runner
"""

import json
import sys

from ab import CONTENDED_FIELDS, alternate, contended, uncontended


def main():
    if sys.argv[1] == "--contended":
        kind, before, after = sys.argv[2], sys.argv[3], sys.argv[4]
        rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 5
        seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 4.0
        summary = alternate({"after": lambda url: contended(after, url, kind, seconds),
                             "before": lambda url: contended(before, url, kind, seconds)}, rounds, "build",
                            CONTENDED_FIELDS)
        print(json.dumps({"runner_ab_contended": summary, "kind": kind, "rounds": rounds, "seconds": seconds},
                         indent=1))
        return
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
    summary = alternate({"after": lambda url: uncontended(after, url, n),
                         "before": lambda url: uncontended(before, url, n)}, rounds, "build")
    print(json.dumps({"runner_ab": summary, "rounds": rounds, "n": n}, indent=1))


if __name__ == "__main__":
    main()
