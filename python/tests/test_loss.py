"""The loss notice: lost (an event), on_lost(reason) and release() raising a
LeaseLost subclass, after a force-release, an expiry and a key removed."""
import asyncio
import os
import signal
import subprocess
import threading

import pytest

import dlock
from conftest import RedisServer, dlock_bin, eventually


def test_force_release_is_told_as_revoked(client, name):
    reasons = []
    called_on = []

    def on_lost(reason):
        reasons.append(reason)
        called_on.append(threading.current_thread() is not threading.main_thread())

    lock = client.lock(name, on_lost=on_lost)
    lock.acquire()
    assert client.force_release(name)
    assert lock.lost.wait(5)
    assert lock.lost.is_set() and lock.lost.reason == "revoked" and lock.lost_reason == "revoked"
    assert not lock.held
    assert eventually(lambda: reasons == ["revoked"])
    assert called_on == [True]  # dlock's thread, not the caller's
    with pytest.raises(dlock.LockRevoked) as error:
        lock.release()
    assert isinstance(error.value, dlock.LeaseLost) and error.value.reason == "revoked"
    # The loss is reported once; the lock can be taken again.
    with lock:
        assert lock.held and not lock.lost.is_set()


def test_force_release_by_the_cli(client, name):
    lock = client.lock(name)
    lock.acquire()
    subprocess.run([dlock_bin(), "--url", client.url, "release", "--force", name],
                   check=True, capture_output=True, timeout=30)
    assert lock.lost.wait(5) and lock.lost_reason == "revoked"
    with pytest.raises(dlock.LockRevoked):
        lock.release()


def test_expiry_without_renewal(client, name):
    lost = threading.Event()
    lock = client.lock(name, lease=0.2, renew=False, on_lost=lambda reason: lost.set())
    lock.acquire()
    assert lock.lost.wait(5) and lock.lost_reason == "expired"
    assert lost.wait(5)
    with pytest.raises(dlock.LeaseExpired):
        lock.release()


def test_key_removed_is_taken_over(client, name):
    lock = client.lock(name, lease=0.3)  # renewed every 0.1 s: the renewal finds it gone
    lock.acquire()
    keys = [k.decode() for k in client.command("KEYS", "*" + name + "*")]
    assert keys
    client.command("DEL", *keys)
    assert lock.lost.wait(5) and lock.lost_reason == "taken_over"
    with pytest.raises(dlock.LockTakenOver):
        lock.release()


def test_with_block_reports_the_loss_at_its_end(client, name):
    with pytest.raises(dlock.LeaseLost):
        with client.lock(name) as lock:
            client.force_release(name)
            assert lock.lost.wait(5)


def test_lost_wait_times_out_while_held(client, name):
    with client.lock(name) as lock:
        assert lock.lost.wait(0.05) is False
        assert lock.lost.wait(0) is False and lock.lost.wait(-1) is False  # no wait, as threading.Event
    assert client.lock(name).lost.wait(0.01) is False  # nothing held: never set


def test_rw_and_semaphore_loss(client, name):
    rw = client.rw_lock(name)
    rw.read().acquire()
    client.force_release(name, all=True)
    assert rw.read().lost.wait(5) and rw.read().lost_reason == "revoked"
    with pytest.raises(dlock.LeaseLost):
        rw.read().release()
    sem = client.semaphore(name + ":s", 2)
    sem.acquire()
    client.force_release(name + ":s", all=True)
    assert sem.lost.wait(5) and sem.lost_reason == "revoked"
    with pytest.raises(dlock.LeaseLost):
        sem.release()


def test_unconfirmed_renewals_expire_the_hold(name):
    server = RedisServer()
    try:
        with dlock.Client(server.url, command_timeout=0.2) as c:
            reasons = []
            lock = c.lock(name, lease=0.5, on_lost=reasons.append)
            lock.acquire()
            os.kill(server.process.pid, signal.SIGSTOP)  # renewals go unanswered
            try:
                assert lock.lost.wait(5) and lock.lost_reason == "expired"
                assert eventually(lambda: reasons == ["expired"])
                assert not lock.held
            finally:
                os.kill(server.process.pid, signal.SIGCONT)
            with pytest.raises(dlock.LeaseExpired):
                lock.release()
    finally:
        server.close()


def holds_of_every_kind(client, name, on_lost):
    """(kind, lock object, names to force-release) for each kind on one Client.
    A short lease: when the force-release's inbox notice is missed, the next
    renewal (a second later) finds the hold gone and reports taken_over."""
    rw = client.rw_lock(name + ":rw", lease=3.0, on_lost=on_lost)
    return [
        ("lock", client.lock(name, lease=3.0, on_lost=on_lost), [name]),
        ("fair_lock", client.fair_lock(name + ":fair", lease=3.0, on_lost=on_lost), [name + ":fair"]),
        ("read", rw.read(), [name + ":rw"]),
        ("write", rw.write(), [name + ":rw"]),
        ("semaphore", client.semaphore(name + ":sem", 2, lease=3.0, on_lost=on_lost), [name + ":sem"]),
        ("multi_lock", client.multi_lock([name + ":m1", name + ":m2"], lease=3.0, on_lost=on_lost), [name + ":m1"]),
    ]


@pytest.mark.parametrize("kind", ["lock", "fair_lock", "read", "write", "semaphore", "multi_lock"])
def test_saved_lost_event_keeps_its_reason_after_release(client, name, kind):
    reasons = []
    _, lock, names = next(h for h in holds_of_every_kind(client, name, reasons.append) if h[0] == kind)
    lock.acquire()
    saved = lock.lost  # taken while held, before the loss
    for n in names:
        client.force_release(n, all=True)
    assert saved.wait(10)
    taken_after = lock.lost  # taken after the loss, before the release
    with pytest.raises(dlock.LeaseLost) as error:
        lock.release()
    reason = error.value.reason  # "revoked" (or "taken_over", see holds_of_every_kind)
    assert reason in ("revoked", "taken_over")
    assert saved.is_set() and saved.reason == reason
    assert taken_after.is_set() and taken_after.reason == reason
    assert eventually(lambda: reasons == [reason])  # on_lost's argument: the same reason
    seen = []  # another thread reads the same
    t = threading.Thread(target=lambda: seen.append(saved.reason))
    t.start()
    t.join()
    assert seen == [reason]
    # Held again: the saved event still tells the old loss; a new one is clear.
    with lock:
        assert saved.is_set() and saved.reason == reason
        assert not lock.lost.is_set() and lock.lost.reason is None
    assert saved.reason == reason and reasons == [reason]


def test_saved_lost_event_of_an_expired_redlock_keeps_its_reason(name):
    servers = [RedisServer() for _ in range(3)]
    try:
        reasons = []
        lock = dlock.Redlock([s.url for s in servers], name, lease=0.3, renew=False, on_lost=reasons.append)
        lock.acquire()
        saved = lock.lost
        assert saved.wait(5)
        with pytest.raises(dlock.LeaseExpired):
            lock.release()
        assert saved.reason == "expired" and lock.lost.reason is None
        assert eventually(lambda: reasons == ["expired"])
        lock.masters.close()
    finally:
        for s in servers:
            s.close()


def test_saved_lost_event_of_a_task_keeps_its_reason(client, name):
    lock = client.lock(name)

    async def main():
        assert await lock.acquire_async()
        saved = lock.lost
        client.force_release(name)
        assert await asyncio.to_thread(saved.wait, 5)
        with pytest.raises(dlock.LockRevoked):
            await lock.release_async()
        return saved

    saved = asyncio.run(asyncio.wait_for(main(), 60))
    assert saved.is_set() and saved.reason == "revoked"
