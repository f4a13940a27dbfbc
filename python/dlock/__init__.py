"""dlock: distributed locks on Redis, from Python.

The same locks as dlock's C++ library (it runs underneath): leased and
renewed, reentrant per thread, fair, fenced, with a notice when a hold is
lost; the same keys, so a Python process and a C++ one exclude each other on
one name.

    import dlock

    client = dlock.Client("redis://127.0.0.1:6379")  # no argument: DLOCK_URL, REDIS_URL, then localhost
    lock = client.lock("orders:42", lease=30.0)      # seconds, or a datetime.timedelta
    with lock:                                       # waits; woken by push, never polls
        token = lock.fencing_token                   # hand it to the resource
        if lock.lost.is_set():                       # a threading.Event-like object
            raise SystemExit("lost the lock")

Threads are owners: each thread of a process is its own owner, and the same
thread may take a lock again (a hold count). acquire(blocking=True,
timeout=-1) reads its arguments as threading.Lock does and returns False on
contention; failures raise dlock.Error subclasses. Blocking calls release
the GIL; Ctrl-C ends a wait on the main thread at once, holding nothing.

Loss: ``lock.lost`` (is_set(), wait()), ``on_lost=callable(reason)`` (run on
dlock's own thread with the GIL held; it must not block), and release()
raising a dlock.LeaseLost subclass after a loss.

Names: str (sent as UTF-8) or bytes (sent as they are: any bytes); ``name``
(and ``names``, ``fencing_tokens``' keys) give back what was given, a str
for a str and bytes for bytes. "a" and b"a" are one lock.

Fork: a Client must not be used in a child of the process that made it;
every call there raises dlock.ForkedChild, and the parent's connections are
left untouched. Make a new Client in the child (multiprocessing workers
started with fork, too).
"""
import atexit
import datetime
import math
import os

from . import _dlock
from ._aio import AsyncHolds
from ._errors import *  # noqa: F401,F403
from ._errors import ClientClosed, ForkedChild, __all__ as _error_names

DEFAULT_URL = "redis://127.0.0.1:6379"

atexit.register(_dlock._shutdown)
os.register_at_fork(after_in_child=_dlock._after_fork_in_child)


# The longest duration taken (about 31 years): past it a count of
# milliseconds would not fit the library's clocks.
_MAX_SECONDS = 1e9


def _seconds(value, what):
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
    else:
        raise TypeError("%s must be seconds (a float) or a datetime.timedelta, not %s" % (what, type(value).__name__))
    if math.isnan(value):
        raise ValueError("%s is NaN: give a number of seconds" % what)
    if abs(value) > _MAX_SECONDS:
        raise OverflowError("%s %r is too large (at most %.0f seconds)" % (what, value, _MAX_SECONDS))
    return value


def _timeout(value):
    return _seconds(value, "timeout")


def _name(name):
    """A lock name as given: str (sent as UTF-8) or bytes (sent as they are)."""
    if isinstance(name, str):
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("lock name %r is not valid Unicode text: give its bytes instead" % (name,)) from None
        return name
    if isinstance(name, bytes):
        return name
    raise TypeError("a lock name is str or bytes, not %s" % type(name).__name__)


class _Names:
    """The names a lock object was made with, as the caller gave them (str
    or bytes): dlock hands names back as bytes, and this maps them back."""

    def __init__(self, given):
        self.given = given
        self._by_bytes = {}
        for name in given:
            self._by_bytes.setdefault(name.encode("utf-8") if isinstance(name, str) else name, name)

    def __call__(self, raw):
        return self._by_bytes.get(raw, raw)


def _command_argument(position, value):
    """One argument of Client.command as the bytes Redis gets (redis-py's rules)."""
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    raise TypeError("command argument %d is %s: give str, bytes, int or float" % (position, type(value).__name__))


class _Closing:
    """close(), closed and ``with`` of a Client or Masters (its _native)."""

    @property
    def closed(self):
        return self._native.closed

    def close(self):
        """Releases every lock still held through it and closes its connections."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Client(_Closing):
    """A connection to one Redis server (standalone, Sentinel or Cluster URL).

    url: redis://, rediss://, unix://, redis-sentinel://, redis-cluster://;
    None takes DLOCK_URL, then REDIS_URL, then redis://127.0.0.1:6379.
    One Client per process is the normal case: it is thread-safe, and every
    thread's commands share its connection. Connecting happens in the
    background; an unreachable server is reported by the first call.
    close() (or leaving a ``with`` block) releases every lock still held
    through it; every call after it, release() too, raises ClientClosed.
    """

    def __init__(self, url=None, *, connect_timeout=2.0, command_timeout=5.0, client_name="dlock"):
        if url is None:
            url = os.environ.get("DLOCK_URL") or os.environ.get("REDIS_URL") or DEFAULT_URL
        self.url = url
        self._pid = os.getpid()
        self._native = _dlock.Client(url, _seconds(connect_timeout, "connect_timeout"),
                                     _seconds(command_timeout, "command_timeout"), client_name)

    def _live(self):
        if os.getpid() != self._pid:
            raise ForkedChild("this dlock.Client was made in process %d before fork(); make a new dlock.Client "
                              "in the child (pid %d)" % (self._pid, os.getpid()))
        return self._native

    def lock(self, name, *, lease=30.0, renew=True, on_lost=None):
        """A reentrant exclusive lock on name (see Lock)."""
        return Lock(_dlock.Lock(self._live(), _name(name), _seconds(lease, "lease"), renew, on_lost), self, [name])

    def fair_lock(self, name, *, lease=30.0, renew=True, on_lost=None):
        """A lock granted strictly in arrival order across every thread of every process."""
        return Lock(_dlock.FairLock(self._live(), _name(name), _seconds(lease, "lease"), renew, on_lost), self,
                    [name])

    def rw_lock(self, name, *, lease=30.0, renew=True, on_lost=None, prefer_readers=False):
        """A read-write lock: ``with rw.read():`` (shared) or ``with rw.write():`` (exclusive)."""
        return RwLock(_dlock.RwLock(self._live(), _name(name), _seconds(lease, "lease"), renew, on_lost,
                                    prefer_readers), self, name)

    def semaphore(self, name, permits, *, lease=30.0, renew=True, on_lost=None):
        """At most ``permits`` holders at once across processes (threading.Semaphore's shape)."""
        return Semaphore(_dlock.Semaphore(self._live(), _name(name), permits, _seconds(lease, "lease"), renew,
                                          on_lost), self, name)

    def multi_lock(self, names, *, lease=30.0, renew=True, on_lost=None):
        """Several names taken together, all or none (no deadlock between overlapping sets)."""
        names = [_name(n) for n in names]
        return Lock(_dlock.MultiLock(self._live(), names, _seconds(lease, "lease"), renew, on_lost), self, names)

    def command(self, *args):
        """One Redis command; the reply as bytes, int, str (status), list or None.
        Arguments: str (sent as UTF-8), bytes, bytearray or memoryview (sent as
        they are), int or float (their decimal text); anything else is a TypeError."""
        return self._live().command([_command_argument(i, a) for i, a in enumerate(args)])

    def inspect(self, name):
        """What holds name now, of every kind (what `dlock status` shows), as a dict."""
        return self._live().inspect(name)

    def force_release(self, name, all=False):
        """An operator's override: breaks the holds of name and tells their holders
        (their ``lost`` fires, reason "revoked"). Returns the broken holders' ids."""
        return self._live().force_release(name, all)

    def wait_connected(self):
        """Waits until the connection is up; raises its error when it failed."""
        self._live().wait_connected()

    def __repr__(self):
        return "dlock.Client(%r)" % (self.url,)


class _Hold(AsyncHolds):
    """What every lock object shares: threading.Lock's methods, ``with``,
    ``async with``, and the queries about the caller's hold."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self._made_in = os.getpid()  # a forked child holds nothing of its parent's
        return self

    def acquire(self, blocking=True, timeout=-1):
        """Waits for the lock (blocking=False: one attempt; timeout seconds:
        at most that long, honoured within a round trip). True when held."""
        return self._n.acquire(blocking, _timeout(timeout))

    def release(self):
        """Releases one hold of the calling thread and waits for the answer.
        Raises ClientClosed once its Client (a Redlock's Masters) is closed:
        close() released what it held."""
        self._check_open("release")
        self._release()

    def _check_open(self, call):
        client = self._client
        if client.closed:
            raise ClientClosed("%s of %r: its dlock.%s is closed (close() released what it held)"
                               % (call, self.name, type(client).__name__))

    # One native object (Lock, Semaphore); an RwLock side overrides these.
    def _release(self):
        self._n.release()

    def _lost(self):
        return self._n.lost

    def _query(self, what):
        return getattr(self._n, what)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    @property
    def lost(self):
        """A threading.Event-like view of the caller's hold: is_set() once it is
        lost, wait(timeout) for that; ``reason`` says why, the reason the loss
        was reported with (on_lost's, release()'s exception's), also after the
        hold is released or taken again. Taken while nothing is held, it is
        never set."""
        hold = self._task_hold()
        return hold.lost if hold is not None else self._lost()

    @property
    def lost_reason(self):
        """"expired", "revoked", "taken_over" or "renewal_refused" once the
        caller's hold was lost (until it releases or acquires again); else None."""
        hold = self._task_hold()
        return hold.lost_reason if hold is not None else self._query("lost_reason")

    @property
    def held(self):
        """The caller holds it, not lost, lease still valid. False in a forked
        child: the hold is its parent's (every call there raises ForkedChild)."""
        if os.getpid() != self._made_in:
            return False
        hold = self._task_hold()
        return hold.held if hold is not None else self._query("held")

    @property
    def valid_for(self):
        """Seconds the caller's hold stays valid without a renewal; 0 when not held."""
        hold = self._task_hold()
        return hold.valid_for if hold is not None else self._query("valid_for")


class Lock(_Hold):
    """An exclusive lock (client.lock, fair_lock, multi_lock) or a Redlock.

    acquire(blocking=True, timeout=-1) -> bool, release(), ``with``,
    ``async with``. Reentrant per thread: the same thread may acquire again,
    and only the last release lets it go. release() raises NotOwner when the
    caller holds nothing, a LeaseLost subclass when its hold was lost, and
    ClientClosed once its Client was closed.
    Mutual exclusion holds only while the lease is valid: pass
    fencing_token to the resource so it can refuse a stale holder.
    """

    def __init__(self, native, client, names):
        self._n = native
        self._client = client  # keeps the Client (or Redlock's masters) alive
        self._names = _Names(names)

    def _start_async(self, blocking, timeout, done):
        return _dlock.start_acquire(self._n, blocking, timeout, done)

    @property
    def name(self):
        """The name as given: a str name is a str, a bytes name bytes. A
        multi-lock's: the first of names."""
        return self.names[0]

    @property
    def names(self):
        """A multi-lock's names, in the order it takes them (sorted by their
        bytes, duplicates once), as given (one name for the other kinds)."""
        names = getattr(self._n, "names", None)
        return list(self._names.given) if names is None else [self._names(raw) for raw in names]

    @property
    def hold_count(self):
        """The calling thread's re-entries; 0 when it holds nothing."""
        return self._n.hold_count

    @property
    def fencing_token(self):
        """The caller's token (strictly increasing per name); 0 when not held.
        A multi-lock's: its first name's (fencing_tokens has them all)."""
        hold = self._task_hold()
        if hold is not None:
            return hold.fencing_token
        tokens = getattr(self._n, "fencing_tokens", None)
        return self._n.fencing_token if tokens is None else next(iter(tokens.values()), 0)

    @property
    def fencing_tokens(self):
        """{name: token} of the caller's hold."""
        hold = self._task_hold()
        if hold is not None:
            tokens = hold.fencing_tokens
        else:
            tokens = getattr(self._n, "fencing_tokens", None)
            if tokens is None:
                return {self.name: self._n.fencing_token}
        return {self._names(raw): token for raw, token in tokens.items()}

    def __repr__(self):
        return "<dlock.%s %r>" % (type(self._n).__name__, self.name)


class Redlock(Lock):
    """A lock over several independent Redis masters (a majority grants it).

    urls: the masters' URLs (or a Masters object shared by many Redlocks).
    """

    def __init__(self, urls, name, *, lease=30.0, renew=True, on_lost=None, connect_timeout=2.0,
                 command_timeout=5.0):
        masters = urls if isinstance(urls, Masters) else Masters(urls, connect_timeout=connect_timeout,
                                                                  command_timeout=command_timeout)
        super().__init__(_dlock.Redlock(masters._native, _name(name), _seconds(lease, "lease"), renew, on_lost),
                         masters, [name])

    @property
    def masters(self):
        """The Masters it was made over (its own when it was given URLs)."""
        return self._client


class Masters(_Closing):
    """The independent masters of Redlocks: one client each. close() (or
    leaving a ``with`` block) releases every Redlock still held through them;
    Redlocks over closed masters raise ClientClosed."""

    def __init__(self, urls, *, connect_timeout=2.0, command_timeout=5.0):
        if isinstance(urls, (str, bytes)):
            raise TypeError("Redlock takes a list of master URLs (several independent servers), not one URL: "
                            "[%r, ...]" % (urls,))
        self.urls = list(urls)
        self._native = _dlock.Masters(self.urls, _seconds(connect_timeout, "connect_timeout"),
                                      _seconds(command_timeout, "command_timeout"))

    @property
    def quorum(self):
        return self._native.quorum


class RwLock:
    """A read-write lock: ``rw.read()`` and ``rw.write()`` are lock objects
    (acquire/release, ``with``, ``async with``). Readers share it; a writer
    excludes readers and other writers. Each thread is its own owner on each side."""

    def __init__(self, native, client, name):
        self._n = native
        self._client = client
        self._name = name
        self._read = _RwSide(native, True, self)
        self._write = _RwSide(native, False, self)

    @property
    def name(self):
        """The name as given (str or bytes)."""
        return self._name

    def read(self):
        return self._read

    def write(self):
        return self._write

    def __repr__(self):
        return "<dlock.RwLock %r>" % (self.name,)


class _RwSide(_Hold):
    def __init__(self, native, shared, rw):
        self._n = native
        self._shared = shared
        self._rw = rw

    @property
    def _client(self):
        return self._rw._client

    def acquire(self, blocking=True, timeout=-1):
        return self._n.acquire(self._shared, blocking, _timeout(timeout))

    def _release(self):
        self._n.release(self._shared)

    def _lost(self):
        return self._n.lost(self._shared)

    def _query(self, what):
        return getattr(self._n, what)(self._shared)

    def _start_async(self, blocking, timeout, done):
        return _dlock.start_acquire(self._n, self._shared, blocking, timeout, done)

    @property
    def name(self):
        return self._rw.name

    @property
    def hold_count(self):
        return self._n.hold_count(self._shared)

    @property
    def fencing_token(self):
        """The write side's token; a reader's is the last write's."""
        hold = self._task_hold()
        return hold.fencing_token if hold is not None else self._n.fencing_token(self._shared)


class Semaphore(_Hold):
    """At most ``permits`` holders at once, across processes.

    acquire(blocking=True, timeout=-1) takes one permit for the calling
    thread; release() gives back the caller's latest (or, as
    threading.Semaphore allows, one another thread took). Permits are leased
    and renewed like locks; a crashed holder's permit comes back after its lease.
    """

    def __init__(self, native, client, name):
        self._n = native
        self._client = client
        self._name = name

    def _start_async(self, blocking, timeout, done):
        return _dlock.start_acquire(self._n, 1, blocking, timeout, done)

    @property
    def name(self):
        """The name as given (str or bytes)."""
        return self._name

    @property
    def permits_held(self):
        """Permits this object's threads hold now."""
        return self._n.permits_held

    def set_limit(self, permits):
        """Changes the limit for every process; returns the previous one."""
        return self._n.set_limit(permits)

    def __repr__(self):
        return "<dlock.Semaphore %r>" % (self.name,)


__all__ = ["Client", "Lock", "Redlock", "Masters", "RwLock", "Semaphore", "DEFAULT_URL"] + _error_names
