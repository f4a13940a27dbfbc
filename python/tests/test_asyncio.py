"""asyncio: async with, acquire_async with a timeout, tasks as owners, and
cancellation leaving nothing held or queued."""
import asyncio

import pytest

import dlock
from conftest import eventually


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def test_async_with_gives_a_token(client, name):
    lock = client.lock(name)

    async def main():
        async with lock:
            assert lock.held and lock.fencing_token > 0
            return lock.fencing_token

    assert run(main()) > 0
    assert client.inspect(name)["kind"] == "free"


def test_tasks_are_owners_and_exclude_each_other(client, name):
    lock = client.lock(name)
    inside = []
    overlaps = []

    async def worker():
        for _ in range(5):
            async with lock:
                if inside:
                    overlaps.append(1)
                inside.append(1)
                await asyncio.sleep(0.001)
                inside.pop()

    async def main():
        await asyncio.gather(*(worker() for _ in range(6)))

    run(main())
    assert not overlaps


def test_timeout_and_non_blocking(client, name):
    lock = client.lock(name)
    other = client.lock(name)

    async def main():
        assert await lock.acquire_async()
        assert await asyncio.create_task(other.acquire_async(timeout=0.1)) is False
        assert await asyncio.create_task(other.acquire_async(blocking=False)) is False
        with pytest.raises(ValueError):
            await other.acquire_async(blocking=False, timeout=1)
        await lock.release_async()
        with pytest.raises(dlock.NotOwner):
            await lock.release_async()

    run(main())


def test_cancelled_wait_leaves_nothing(client, server, name):
    holder_client = dlock.Client(server.url)
    holder = holder_client.fair_lock(name)
    holder.acquire()
    lock = client.fair_lock(name)

    async def main():
        task = asyncio.create_task(lock.acquire_async())
        assert await asyncio.to_thread(eventually, lambda: client.inspect(name)["waiters"] == 1, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(lock.acquire_async(), 0.2)

    run(main())
    assert eventually(lambda: client.inspect(name)["waiters"] == 0, 5)
    holder.release()
    assert eventually(lambda: client.inspect(name)["kind"] == "free", 5)  # granted to nobody
    holder_client.close()


def test_async_kinds(client, name):
    rw = client.rw_lock(name + ":rw")
    sem = client.semaphore(name + ":sem", 2)
    multi = client.multi_lock([name + ":a", name + ":b"])

    async def main():
        async with rw.read():
            assert rw.read().held
        async with rw.write():
            assert rw.write().fencing_token > 0
        async with sem:
            assert sem.held
        async with multi:
            assert len(multi.fencing_tokens) == 2

    run(main())


def test_async_loss_is_raised_at_release(client, name):
    lock = client.lock(name)

    async def main():
        await lock.acquire_async()
        client.force_release(name)
        assert await asyncio.to_thread(lock.lost.wait, 5)
        assert lock.lost_reason == "revoked"
        with pytest.raises(dlock.LockRevoked):
            await lock.release_async()

    run(main())


def test_a_hold_acquired_in_a_task_that_ended_is_released_by_whoever_goes_on(client, name):
    # wait_for (before Python 3.12), create_task and gather run the
    # acquisition in a task of their own, which ends holding the lock.
    lock = client.lock(name, lease=1.0)

    async def main():
        assert await asyncio.wait_for(lock.acquire_async(), 5)
        assert lock.held
        await lock.release_async()
        assert client.inspect(name)["kind"] == "free"
        assert await asyncio.create_task(lock.acquire_async())
        await lock.release_async()
        assert await asyncio.gather(lock.acquire_async()) == [True]
        await lock.release_async()
        assert client.inspect(name)["kind"] == "free"
        with pytest.raises(dlock.NotOwner):
            await lock.release_async()

    run(main())


def test_a_live_tasks_hold_stays_its_own(client, name):
    lock = client.lock(name)

    async def main():
        acquired = asyncio.Event()
        done = asyncio.Event()

        async def holder():
            await lock.acquire_async()
            acquired.set()
            await done.wait()
            await lock.release_async()

        task = asyncio.create_task(holder())
        await acquired.wait()
        with pytest.raises(dlock.NotOwner):
            await lock.release_async()
        assert client.inspect(name)["kind"] == "exclusive"
        done.set()
        await task

    run(main())
    assert client.inspect(name)["kind"] == "free"
