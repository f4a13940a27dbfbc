"""Processes: Python processes exclude each other, a Python process and the
C++ `dlock run` exclude each other on one name, and a forked child gets a
clear error from its parent's Client (a new Client works there)."""
import multiprocessing
import os
import subprocess
import time

import pytest

import dlock
from conftest import dlock_bin, python_child

WORKER = r"""
import sys, dlock
name, rounds = sys.argv[1], int(sys.argv[2])
client = dlock.Client()
lock = client.lock(name)
for _ in range(rounds):
    with lock:
        seen = int(client.command("GET", name + ":counter") or 0)
        client.command("SET", name + ":counter", seen + 1)  # not atomic: an overlap loses an update
print("done", flush=True)
"""


def test_python_and_the_cli_exclude_each_other(server, client, name):
    command = dlock_bin()
    # The CLI holds the name while its command runs; Python cannot take it meanwhile.
    cli = subprocess.Popen([command, "--url", server.url, "run", name, "--", "sh", "-c",
                            "echo $DLOCK_FENCING_TOKEN; read line"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cli_token = int(cli.stdout.readline())
    lock = client.lock(name)
    assert lock.acquire(timeout=0.2) is False
    cli.stdin.write("go\n")
    cli.stdin.close()
    assert lock.acquire(timeout=10)
    assert lock.fencing_token > cli_token  # one token sequence for both
    # Now Python holds it: the CLI's one attempt fails (exit 75).
    busy = subprocess.run([command, "--url", server.url, "run", "--no-wait", name, "--", "true"], timeout=30)
    assert busy.returncode == 75
    lock.release()
    free = subprocess.run([command, "--url", server.url, "run", "--no-wait", name, "--", "true"], timeout=30)
    assert free.returncode == 0
    cli.wait(timeout=30)


def child_with_parents_client(client, name, out):
    try:
        client.lock(name)
        out.put("no error")
    except dlock.ForkedChild as e:
        out.put("ForkedChild: " + str(e))
    try:
        with dlock.Client(client.url) as fresh, fresh.lock(name) as lock:
            out.put("fresh %d" % lock.fencing_token)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        out.put("fresh failed: %r" % e)


def test_fork_child_gets_a_clear_error_and_a_fresh_client_works(client, name):
    held = client.lock(name + ":parent")
    held.acquire()
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=child_with_parents_client, args=(client, name, out))
    child.start()
    first, second = out.get(timeout=60), out.get(timeout=60)
    child.join(60)
    assert first.startswith("ForkedChild: ") and "make a new dlock.Client in the child" in first
    assert second.startswith("fresh ") and int(second.split()[1]) > 0
    # The parent's client and its hold are untouched.
    assert held.held and not held.lost.is_set()
    held.release()
    with client.lock(name):
        pass


def test_lock_made_before_fork_fails_in_the_child(client, name):
    lock = client.lock(name)
    lock.acquire()  # the parent holds it: the child does not
    pid = os.fork()
    if pid == 0:
        held_in_child = lock.held
        code = 3
        try:
            lock.acquire(blocking=False)
            code = 1
        except dlock.ForkedChild:
            code = 0 if not held_in_child else 4
        except BaseException:  # noqa: BLE001
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lock.held  # the parent's hold is untouched
    lock.release()
    with lock:  # the parent's still works
        assert lock.held


@pytest.mark.parametrize("kind", ["lock", "fair_lock"])
def test_processes_exclude_each_other(server, client, name, kind):
    code = WORKER.replace("client.lock(name)", "getattr(client, %r)(name)" % kind)
    children = [python_child(code, server.url, name, "25") for _ in range(4)]
    started = time.monotonic()
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    assert int(client.command("GET", name + ":counter")) == 100
    assert time.monotonic() - started < 120
