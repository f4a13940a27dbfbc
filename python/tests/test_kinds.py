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


def test_names_come_back_as_given(client, name):
    raw = name.encode() + b":\xff\xfe\x00"  # not UTF-8: any bytes name a lock
    lock = client.lock(raw)
    assert lock.name == raw and lock.names == [raw]
    with lock:
        assert lock.fencing_tokens == {raw: lock.fencing_token}
        assert client.inspect(raw)["kind"] == "exclusive"
        other = client.lock(raw)  # the same name, the same thread: re-entry
        assert other.acquire(blocking=False) and lock.hold_count == 2
        other.release()
    assert "\\xff" in repr(lock)
    with pytest.raises(dlock.NotOwner, match=r"\\xff\\xfe\x00': .*not held"):  # bytes that are not text escaped
        lock.release()
    with pytest.raises(dlock.NotOwner, match=r"\\xff\\xfe\x00': no permit held"):
        client.semaphore(raw, 2).release()
    assert client.lock(name).name == name and type(client.lock(name).name) is str
    assert client.fair_lock(raw).name == raw
    assert client.rw_lock(raw).name == raw and client.rw_lock(raw).read().name == raw
    assert client.semaphore(raw, 2).name == raw
    multi = client.multi_lock([raw, name + ":a"])
    with multi:
        assert multi.fencing_tokens.keys() == {name + ":a", raw}
    assert multi.names == [name + ":a", raw] and multi.name == name + ":a"  # taken in the order of their bytes

    async def task():
        async with lock:
            return lock.fencing_tokens, lock.name

    import asyncio
    tokens, task_name = asyncio.run(task())
    assert list(tokens) == [raw] and task_name == raw
    with pytest.raises(TypeError, match="str or bytes"):
        client.lock(42)
    with pytest.raises(ValueError, match="give its bytes"):
        client.lock("\udcff")


def test_release_after_close_is_client_closed(server, name):
    c = dlock.Client(server.url)
    rw = c.rw_lock(name + ":rw")
    holds = [c.lock(name), c.fair_lock(name + ":fair"), rw.read(), rw.write(),
             c.semaphore(name + ":sem", 2), c.multi_lock([name + ":m1", name + ":m2"])]
    for hold in holds[:2] + holds[3:]:
        assert hold.acquire(timeout=5)
    assert other_thread(lambda: rw.read().acquire(timeout=5)) is False  # the writer excludes it
    c.close()
    for hold in holds:
        with pytest.raises(dlock.ClientClosed, match="release of .*closed"):
            hold.release()

    import asyncio

    async def asynchronous():
        c2 = dlock.Client(server.url)
        rw2 = c2.rw_lock(name + ":rw2")
        holds = [c2.lock(name), c2.fair_lock(name + ":fair"), rw2.read(), rw2.write(),
                 c2.semaphore(name + ":sem", 2), c2.multi_lock([name + ":m1", name + ":m2"])]
        for hold in holds:
            if hold is not holds[3]:
                assert await hold.acquire_async(timeout=5)
        c2.close()
        for hold in holds:
            with pytest.raises(dlock.ClientClosed):
                await hold.release_async()
            with pytest.raises(dlock.ClientClosed):
                await hold.release_async()  # nothing left to hold after the first

    asyncio.run(asyncio.wait_for(asynchronous(), 60))


def test_redlock_release_after_its_masters_close_is_client_closed(name):
    servers = [RedisServer() for _ in range(3)]
    try:
        with dlock.Masters([s.url for s in servers]) as masters:
            lock = dlock.Redlock(masters, name)
            assert lock.acquire(timeout=5)
        assert masters.closed and lock.masters is masters
        with pytest.raises(dlock.ClientClosed):
            lock.release()
        own = dlock.Redlock([s.url for s in servers], name)
        assert own.acquire(timeout=5)  # close() released the first
        own.masters.close()
        with pytest.raises(dlock.ClientClosed):
            own.release()

        async def asynchronous():
            lock = dlock.Redlock([s.url for s in servers], name)
            assert await lock.acquire_async(timeout=5)
            lock.masters.close()
            with pytest.raises(dlock.ClientClosed):
                await lock.release_async()

        import asyncio
        asyncio.run(asyncio.wait_for(asynchronous(), 60))
    finally:
        for s in servers:
            s.close()
