"""dlock's exceptions: one class per dlock::errc code (include/dlock/error.hpp).

Every exception dlock raises is a dlock.Error; its ``code`` is the errc
name ("command_timeout", "lock_revoked", ...) and its message keeps the
server's own text when Redis sent one. Contention is not an error:
acquire() returns False.
"""
from . import _dlock


class Error(Exception):
    """A dlock call failed. ``code`` names the dlock::errc value."""
    code = "error"


# Caller mistakes.
class InvalidArgument(Error, ValueError):
    """Empty name, a lease out of range, a malformed option."""
    code = "invalid_argument"


class InvalidUri(Error, ValueError):
    """The server URL cannot be parsed."""
    code = "invalid_uri"


# Reaching the server.
class ConnectTimeout(Error, TimeoutError):
    """No connection (or handshake) within connect_timeout."""
    code = "connect_timeout"


class ConnectionRefused(Error):
    """Nothing listens there."""
    code = "connection_refused"


class ResolveFailed(Error):
    """The host name does not resolve."""
    code = "resolve_failed"


class TlsError(Error):
    """The TLS handshake or certificate check failed."""
    code = "tls_error"


class AuthFailed(Error):
    """Wrong password or unknown user."""
    code = "auth_failed"


class NotConnected(Error):
    """The last connect attempt failed; reconnecting in the background."""
    code = "not_connected"


# A command on an established connection.
class CommandTimeout(Error, TimeoutError):
    """No reply within command_timeout; the connection was reset."""
    code = "command_timeout"


class ConnectionLost(Error):
    """The connection dropped with the command in flight (it is not resent)."""
    code = "connection_lost"


class ProtocolError(Error):
    """The server sent bytes that are not RESP."""
    code = "protocol_error"


class ReplyTooLarge(Error):
    """A reply went past a size limit; the message says which."""
    code = "reply_too_large"


class ServerError(Error):
    """An error reply from Redis; the message carries its text."""
    code = "server_error"


class PermissionDenied(Error):
    """NOPERM: the ACL user may not run this command or key."""
    code = "permission_denied"


class WrongType(Error):
    """WRONGTYPE: the key holds another kind of value."""
    code = "wrong_type"


class NoScript(Error):
    """NOSCRIPT (handled inside dlock; seen only in odd cases)."""
    code = "no_script"


# Client lifecycle.
class ClientClosed(Error):
    """The Client was closed."""
    code = "client_closed"


class ForkedChild(Error):
    """A Client made before os.fork() was used in the child: make a new one there."""
    code = "forked_child"


# Locks.
class NotOwner(Error, RuntimeError):
    """release() by a thread (or task) that holds nothing here."""
    code = "not_owner"


class LeaseLost(Error):
    """The hold was lost before it was released; ``reason`` says why."""
    code = "lease_lost"
    reason = None


class LeaseExpired(LeaseLost):
    """Its validity ended before a renewal was confirmed."""
    code = "lease_expired"
    reason = "expired"


class LockRevoked(LeaseLost):
    """An operator force-released it."""
    code = "lock_revoked"
    reason = "revoked"


class LockTakenOver(LeaseLost):
    """The server says it is not ours any more (key gone, restart, failover)."""
    code = "lock_taken_over"
    reason = "taken_over"


class RenewalRefused(LeaseLost):
    """A renewal was refused with an error retrying will not mend."""
    code = "renewal_refused"
    reason = "renewal_refused"


class NoQuorum(Error):
    """Redlock: fewer than a majority of masters answered in time."""
    code = "no_quorum"


class ReplicasNotAcknowledged(Error):
    """WAIT: fewer replicas than required confirmed the write in time."""
    code = "replicas_not_acknowledged"


# Sentinel and Cluster.
class NoMaster(Error):
    code = "no_master"


class NotMaster(Error):
    code = "not_master"


class ClusterDown(Error):
    code = "cluster_down"


class SlotMigrating(Error):
    code = "slot_migrating"


# One name, one resource.
class KindMismatch(Error):
    """The name is held as another kind (a Lock, an RwLock, a Semaphore)."""
    code = "kind_mismatch"


class LimitMismatch(Error):
    """The semaphore exists with another limit."""
    code = "limit_mismatch"


class LayoutMismatch(Error):
    """The lock's data is in a later data layout than this library's."""
    code = "layout_mismatch"


def _all_classes(base):
    for cls in base.__subclasses__():
        yield cls
        yield from _all_classes(cls)


_BY_CODE = {_dlock.ERRC[cls.code]: cls for cls in _all_classes(Error)}
missing = set(_dlock.ERRC) - {cls.code for cls in _BY_CODE.values()}
assert not missing, "no exception class for %s" % sorted(missing)
del missing
_dlock._register_errors(_BY_CODE, Error)

__all__ = ["Error"] + sorted(cls.__name__ for cls in _BY_CODE.values())
