"""asyncio: ``async with lock`` and ``await lock.acquire_async()``.

Each asynchronous acquisition is an owner of its own (dlock/async.hpp): the
hold belongs to the task that awaited it, not to a thread, and is kept here
per task until that task releases it. The wait runs inside dlock (no thread
of the caller's is blocked); its completion comes back on dlock's dispatch
thread and is put on the running loop with call_soon_threadsafe.

Cancelling the awaiting task (task.cancel(), asyncio.timeout, wait_for)
requests the operation's stop: the waiter leaves its place in line and
nothing stays held (a grant that won the race is released in the
background).
"""
import asyncio

from ._errors import NotOwner


def _settle_acquire(future, error, hold):
    if future.done():  # cancelled: what the race granted goes back
        if hold is not None:
            hold.drop()
        return
    if error is None:
        future.set_result(hold)
    elif error == "cancelled":
        future.cancel()
    else:
        future.set_exception(error)


def _settle_release(future, error):
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


async def acquire(start):
    """Runs start(done) -> Canceller and awaits done(error, hold)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(error, hold):  # dlock's dispatch thread, GIL held
        try:
            loop.call_soon_threadsafe(_settle_acquire, future, error, hold)
        except RuntimeError:  # the loop is closed: nobody will take it
            if hold is not None:
                hold.drop()

    canceller = start(done)
    try:
        return await future
    except asyncio.CancelledError:
        canceller.cancel()
        raise


async def release(hold):
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(error):
        try:
            loop.call_soon_threadsafe(_settle_release, future, error)
        except RuntimeError:
            pass

    hold.start_release(done)
    # A cancelled release still completes in the background.
    await asyncio.shield(future)


def current_task():
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class AsyncHolds:
    """The asynchronous side of a lock object: its holds, per task."""

    def _start_async(self, blocking, timeout, done):
        raise NotImplementedError

    def _check_open(self, call):
        raise NotImplementedError

    def _async_holds(self):
        holds = self.__dict__.get("_holds_by_task")
        if holds is None:
            holds = self.__dict__["_holds_by_task"] = {}
        return holds

    def _owning_task(self, task):
        """The task whose holds task may use: its own, or, when it has none,
        one that acquired and has ended. asyncio.wait_for (before Python
        3.12), create_task and gather run acquire_async() in a task of their
        own, which ends holding the lock: its holds pass to whoever goes on
        (a live task's holds stay its own). None when there is neither."""
        holds = self.__dict__.get("_holds_by_task")
        if not holds:
            return None
        if holds.get(task):
            return task
        ended = [owner for owner in holds if owner is not None and owner is not task and owner.done()]
        return ended[-1] if ended else None

    def _task_hold(self):
        """The current task's latest hold of this object (or an ended task's,
        see _owning_task), or None."""
        owner = self._owning_task(current_task())
        return self._async_holds()[owner][-1] if owner is not None else None

    async def acquire_async(self, blocking=True, timeout=-1):
        """As acquire(), awaited: True once held by the current task; False
        when blocking=False or the timeout found it busy. Cancellable."""
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        from . import _timeout  # the synchronous acquire's rules: NaN and huge values refused
        wait = None if timeout == -1 else _timeout(timeout)
        if wait is not None and wait < 0:
            raise ValueError("timeout value must be a non-negative number")
        hold = await acquire(lambda done: self._start_async(blocking, wait, done))
        if hold is None:
            return False
        self._async_holds().setdefault(asyncio.current_task(), []).append(hold)
        return True

    async def release_async(self):
        """Releases the current task's latest hold (or, when it has none, one
        that a task which has ended acquired: wait_for, create_task, gather)
        and awaits the server's answer. Raises NotOwner when there is none,
        a LeaseLost subclass when the hold was lost meanwhile, and
        ClientClosed once its Client is closed (close() released it)."""
        holds = self._async_holds()
        owner = self._owning_task(asyncio.current_task())
        if self._client.closed:
            if owner is not None:
                holds[owner].pop().drop()
                if not holds[owner]:
                    del holds[owner]
            self._check_open("release_async")
        if owner is None:
            raise NotOwner("release_async of %r: this task holds nothing here" % (self.name,))
        mine = holds[owner]
        hold = mine.pop()
        if not mine:
            del holds[owner]
        await release(hold)

    async def __aenter__(self):
        await self.acquire_async()
        return self

    async def __aexit__(self, *exc):
        await self.release_async()
        return False
