"""Before and after a change: the uncontended lock+unlock of two builds of
bench/dlock_runner, alternated in one run (ab.py). Ratio is after / before.

    python3 bench/runner_ab.py BEFORE_RUNNER AFTER_RUNNER [ROUNDS] [N]   (default 6, 20000)

Build the old side from a worktree of the older commit, for example
    git worktree add /tmp/before <commit>
    cmake -S /tmp/before -B /tmp/before/build -DCMAKE_BUILD_TYPE=Release && make -C /tmp/before/build dlock_runner
"""

import json
import sys

from ab import alternate, uncontended


def main():
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
    summary = alternate({"after": lambda url: uncontended(after, url, n),
                         "before": lambda url: uncontended(before, url, n)}, rounds, "build")
    print(json.dumps({"runner_ab": summary, "rounds": rounds, "n": n}, indent=1))


if __name__ == "__main__":
    main()
