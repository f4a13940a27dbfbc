"""examples/python/bonus_pool.py: exactly the pool awarded with the lock,
on a given server and on the one it starts itself."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.environ.get("DLOCK_EXAMPLES") or os.path.join(HERE, "..", "..", "examples", "python"),
                       "bonus_pool.py")


def run_example(*args, url=None):
    env = {k: v for k, v in os.environ.items() if k not in ("DLOCK_URL", "REDIS_URL")}
    result = subprocess.run([sys.executable, EXAMPLE, *args] + ([url] if url else []), env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_bonus_pool_on_a_given_server(server):
    out = run_example("--processes", "4", "--threads", "25", url=server.url)
    assert "awarded 10 of 10, overdrawn by 0, fencing tokens strictly increasing" in out
    assert "Without a lock" in out


def test_bonus_pool_starts_its_own_server():
    out = run_example("--processes", "2", "--threads", "5", "--bonuses", "3")
    assert out.startswith("started redis-server on redis://127.0.0.1:")
    assert "awarded 3 of 3, overdrawn by 0" in out
