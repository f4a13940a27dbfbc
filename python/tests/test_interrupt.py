"""Ctrl-C while waiting: SIGINT to a process whose main thread waits ends
the wait at once with KeyboardInterrupt, and nothing stays held or queued."""
import signal
import time

from conftest import eventually, python_child

WAITER = r"""
import signal, sys, time, dlock
kind, name = sys.argv[1], sys.argv[2]
client = dlock.Client()
if kind == "lock":
    lock = client.lock(name)
elif kind == "fair":
    lock = client.fair_lock(name)
elif kind == "semaphore":
    lock = client.semaphore(name, 1)
elif kind == "write":
    lock = client.rw_lock(name).write()
if len(sys.argv) > 3:  # a handler that does not raise: the wait goes on
    signal.signal(signal.SIGUSR1, lambda *a: print("usr1", flush=True))
print("waiting", flush=True)
try:
    got = lock.acquire(timeout=60)
    print("acquired", got, lock.held, flush=True)
    lock.release()
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), lock.held, flush=True)
"""


def start_waiter(server, holder_lock, kind, name, *extra):
    holder_lock.acquire()
    child = python_child(WAITER, server.url, kind, name, *extra)
    assert child.stdout.readline().strip() == "waiting"
    return child


def interrupt_and_check(client, child, name, field="waiters"):
    # The child is inside its wait: in line on the server.
    assert eventually(lambda: client.inspect(name)[field] == 1, 10)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    words = out.split()
    assert words[0] == "interrupted", (out, err)
    assert float(words[1]) - sent < 5.0  # promptly (the wait was for 60 s): a liveness bound only
    assert words[2] == "False"
    # Nothing of the child's stays: no place in line, and the holder is still the only owner.
    assert eventually(lambda: client.inspect(name)[field] == 0, 5)


def test_ctrl_c_while_waiting_for_a_lock(server, client, name):
    holder = client.lock(name)
    child = start_waiter(server, holder, "lock", name)
    owner = client.inspect(name)["owner"]
    interrupt_and_check(client, child, name)
    assert client.inspect(name)["owner"] == owner
    holder.release()
    assert client.inspect(name)["kind"] == "free"


def test_ctrl_c_while_waiting_in_a_fair_line(server, client, name):
    holder = client.fair_lock(name)
    child = start_waiter(server, holder, "fair", name)
    interrupt_and_check(client, child, name)
    holder.release()
    assert client.inspect(name)["kind"] == "free"  # not granted to the interrupted waiter


def test_ctrl_c_while_waiting_for_a_permit(server, client, name):
    holder = client.semaphore(name, 1)
    child = start_waiter(server, holder, "semaphore", name)
    interrupt_and_check(client, child, name)
    assert client.inspect(name)["permits_used"] == 1
    holder.release()
    assert eventually(lambda: client.inspect(name)["permits_used"] == 0, 5)


def test_ctrl_c_while_waiting_for_the_write_side(server, client, name):
    rw = client.rw_lock(name)
    child = start_waiter(server, rw.read(), "write", name)
    interrupt_and_check(client, child, name)
    rw.read().release()
    assert client.inspect(name)["kind"] == "free"


def test_a_signal_whose_handler_returns_does_not_end_the_wait(server, client, name):
    holder = client.lock(name)
    child = start_waiter(server, holder, "lock", name, "usr1")
    time.sleep(0.2)
    child.send_signal(signal.SIGUSR1)
    assert child.stdout.readline().strip() == "usr1"
    time.sleep(0.2)
    holder.release()
    out, err = child.communicate(timeout=30)
    assert out.split() == ["acquired", "True", "True"], (out, err)


ASYNCIO_WAITER = r"""
import asyncio, os, signal, sys, threading, dlock
name = sys.argv[1]
client = dlock.Client()

async def main():
    loop = asyncio.get_running_loop()
    seen = []
    loop.add_signal_handler(signal.SIGUSR1, lambda: seen.append("usr1"))
    threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGUSR1)).start()
    # A synchronous wait on the loop's thread: dlock's wakeup fd stands in
    # for asyncio's meanwhile, and hands it the signal afterwards.
    got = client.lock(name).acquire(timeout=0.6)
    await asyncio.sleep(0.1)
    print(got, seen, flush=True)

asyncio.run(main())
"""


def test_asyncio_signal_handlers_still_run_after_a_wait(server, client, name):
    holder = client.lock(name)
    holder.acquire()
    child = python_child(ASYNCIO_WAITER, server.url, name)
    out, err = child.communicate(timeout=30)
    assert out.strip() == "False ['usr1']", (out, err)
    holder.release()
