"""Every kind through the Python module: threading.Lock's methods, with,
re-entry per thread, threads as separate owners, timeouts, errors."""
import datetime
import threading
import time

import pytest

import dlock
from conftest import RedisServer


def other_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_lock_with_reentry_and_fencing(client, name):
    lock = client.lock(name, lease=datetime.timedelta(seconds=5))
    with lock:
        first = lock.fencing_token
        assert first > 0 and lock.held and lock.hold_count == 1
        assert not lock.lost.is_set() and lock.lost_reason is None
        assert 0 < lock.valid_for <= 5
        with lock:
            assert lock.hold_count == 2
        assert client.inspect(name)["owner"]
    assert not lock.held and lock.fencing_token == 0
    assert client.inspect(name)["kind"] == "free"
    with lock:
        assert lock.fencing_token > first


def test_threads_are_separate_owners(client, name):
    lock = client.lock(name)
    assert lock.acquire()
    assert other_thread(lambda: client.lock(name).acquire(blocking=False)) is False
    assert other_thread(lambda: lock.acquire(timeout=0.1)) is False
    assert other_thread(lambda: lock.acquire(timeout=datetime.timedelta(milliseconds=50))) is False
    with pytest.raises(dlock.NotOwner):
        other_thread_error(lock.release)
    lock.release()
    assert other_thread(lambda: (lock.acquire(blocking=False), lock.release())[0]) is True


def other_thread_error(fn):
    errors = []

    def run():
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - handed back to the test
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]


def test_threads_exclude_each_other(client, name):
    counter = [0]
    overlaps = []
    inside = threading.Semaphore(1)

    def worker():
        lock = client.lock(name)
        for _ in range(20):
            with lock:
                if not inside.acquire(blocking=False):
                    overlaps.append(1)
                seen = counter[0]
                time.sleep(0.0005)
                counter[0] = seen + 1
                inside.release()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter[0] == 160 and not overlaps


def test_timeout_is_honoured(client, name):
    holder = client.lock(name)
    holder.acquire()
    started = time.monotonic()
    assert other_thread(lambda: client.lock(name).acquire(timeout=0.3)) is False
    waited = time.monotonic() - started
    assert 0.3 <= waited < 3.0  # liveness bound only
    # The waiter left nothing behind: released, the name is free.
    holder.release()
    assert client.inspect(name)["kind"] == "free"


def test_threading_lock_argument_rules(client, name):
    lock = client.lock(name)
    with pytest.raises(ValueError):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError):
        lock.acquire(timeout=-2)
    with pytest.raises(TypeError):
        client.lock(name, lease="30")
    with pytest.raises(dlock.InvalidArgument):
        client.lock(name, lease=0.001)
    with pytest.raises(dlock.InvalidArgument):
        client.lock("")
    with pytest.raises(dlock.NotOwner):
        lock.release()


def test_fair_lock(client, name):
    lock = client.fair_lock(name)
    with lock:
        assert lock.held
        assert other_thread(lambda: lock.acquire(timeout=0.05)) is False
    assert other_thread(lambda: (lock.acquire(), lock.release()) and True)


def test_rw_lock(client, name):
    rw = client.rw_lock(name)
    with rw.read():
        assert rw.read().held and not rw.write().held
        assert other_thread(lambda: (rw.read().acquire(timeout=1), rw.read().release())[0]) is True
        assert other_thread(lambda: rw.write().acquire(timeout=0.1)) is False
    with rw.write():
        assert rw.write().fencing_token > 0
        assert other_thread(lambda: rw.read().acquire(timeout=0.1)) is False


def test_semaphore(client, name):
    sem = client.semaphore(name, 2)
    assert sem.acquire()
    assert other_thread(lambda: sem.acquire(timeout=1)) is True
    assert sem.permits_held == 2
    assert other_thread(lambda: sem.acquire(timeout=0.1)) is False
    assert client.inspect(name)["permits_used"] == 2
    sem.release()
    sem.release()  # the other thread's, as threading.Semaphore allows
    assert sem.permits_held == 0
    with pytest.raises(dlock.NotOwner):
        sem.release()
    with sem:
        assert sem.held


def test_multi_lock(client, name):
    multi = client.multi_lock([name + ":a", name + ":b"])
    with multi:
        tokens = multi.fencing_tokens
        assert set(tokens) == {name + ":a", name + ":b"} and all(t > 0 for t in tokens.values())
        assert other_thread(lambda: client.lock(name + ":b").acquire(blocking=False)) is False
    assert other_thread(lambda: (client.lock(name + ":b").acquire(blocking=False)))


def test_redlock_over_three_masters(name):
    servers = [RedisServer() for _ in range(3)]
    try:
        lock = dlock.Redlock([s.url for s in servers], name, lease=5.0)
        with lock:
            assert lock.held and lock.fencing_token > 0
            assert other_thread(lambda: lock.acquire(blocking=False)) is False
        assert not lock.held
    finally:
        for s in servers:
            s.close()


def test_kind_mismatch_keeps_the_text(client, name):
    with client.semaphore(name, 3):
        with pytest.raises(dlock.KindMismatch) as error:
            client.lock(name).acquire(blocking=False)
        assert error.value.code == "kind_mismatch" and "semaphore" in str(error.value)


def test_server_error_keeps_redis_text(client):
    with pytest.raises(dlock.ServerError) as error:
        client.command("NOSUCHCOMMAND", "x")
    assert error.value.code == "server_error" and "unknown command" in str(error.value)


def test_url_from_environment(server, monkeypatch, name):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("DLOCK_URL", server.url)
    with dlock.Client() as c:
        assert c.url == server.url
        with c.lock(name):
            pass
    monkeypatch.delenv("DLOCK_URL")
    monkeypatch.setenv("REDIS_URL", server.url)
    assert dlock.Client().url == server.url
    monkeypatch.delenv("REDIS_URL")
    assert dlock.Client().url == dlock.DEFAULT_URL


def test_unreachable_server_is_a_typed_error(name):
    with dlock.Client("redis://127.0.0.1:1", connect_timeout=0.2) as c:
        with pytest.raises(dlock.Error) as error:
            c.lock(name).acquire(blocking=False)
        assert error.value.code in ("connection_refused", "not_connected", "connect_timeout")


def test_closed_client(server, name):
    c = dlock.Client(server.url)
    lock = c.lock(name)
    lock.acquire()
    c.close()
    with pytest.raises(dlock.ClientClosed):
        c.lock(name)
    with dlock.Client(server.url) as other:  # closing released it
        assert other.inspect(name)["kind"] == "free"


def test_blocking_releases_the_gil(client, server, name):
    other = dlock.Client(server.url)  # another client: another owner
    holder = other.lock(name)
    holder.acquire()
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        assert client.lock(name).acquire(timeout=0.3) is False
    finally:
        stop.set()
        t.join()
    holder.release()
    other.close()
    assert ticks[0] > 1000  # the spinning thread ran while this one waited


def test_durations_that_are_not_numbers_of_seconds_are_refused(client, name):
    lock = client.lock(name)
    for bad in (float("nan"),):
        with pytest.raises(ValueError):
            client.lock(name, lease=bad)
        with pytest.raises(ValueError):
            lock.acquire(timeout=bad)
    for huge in (float("inf"), 1e99):
        with pytest.raises(OverflowError):
            client.lock(name, lease=huge)
        with pytest.raises(OverflowError):
            lock.acquire(timeout=huge)
        with pytest.raises(OverflowError):
            dlock.Client(client.url, command_timeout=huge)

    async def asynchronous():
        with pytest.raises(ValueError):
            await lock.acquire_async(timeout=float("nan"))

    import asyncio
    asyncio.run(asynchronous())
    assert client.inspect(name)["kind"] == "free"


def test_command_sends_bytes_as_they_are(client, name):
    key = name.encode() + b":\xff\x00bytes"
    assert client.command("SET", key, bytearray(b"v\x00w")) == "OK"
    assert client.command("GET", memoryview(key)) == b"v\x00w"
    assert client.command("INCRBY", name + ":n", 5) == 5
    assert client.command("DEL", key, name + ":n") == 2
    with pytest.raises(TypeError):
        client.command("SET", name, None)


def test_redlock_takes_a_list_of_urls(name):
    with pytest.raises(TypeError, match="list of master URLs"):
        dlock.Redlock("redis://127.0.0.1:1", name)
