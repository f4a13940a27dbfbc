"""What the fault suite runs against: private redis-server processes on free
loopback ports (stopped by pid, never by name), a minimal RESP client for the
suite's own commands, and a TCP proxy that can black-hole or be pointed at
another server (a failover without Sentinel)."""

import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def command(port, *args, timeout=5.0, host="127.0.0.1", password=None):
    """Sends one command and returns its reply (bytes, int, list, None);
    an error reply raises RuntimeError with Redis's text."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        f = s.makefile("rb")
        if password:
            s.sendall(_encode(["AUTH", password]))
            _read_reply(f)
        s.sendall(_encode(args))
        return _read_reply(f)


class Endpoint:
    """A redis:// URL the user gave: host, port, password."""

    def __init__(self, url):
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme != "redis" or not parsed.hostname:
            raise ValueError("--lock-url takes redis://[:password@]host[:port], not %r" % url)
        self.host, self.port = parsed.hostname, parsed.port or 6379
        self.password = urllib.parse.unquote(parsed.password) if parsed.password else None
        self.given = url

    def url(self):
        return self.given

    def command(self, *args):
        return command(self.port, *args, host=self.host, password=self.password)

    def close(self):
        pass


def _read_reply(f):
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest
    if kind == b"-":
        raise RuntimeError(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise ValueError("unexpected reply %r" % line)


class RedisServer:
    """One redis-server. persistence: None, or "aof" (appendfsync always)."""

    def __init__(self, persistence=None, extra=()):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="dlock-faults-")
        self.persistence = persistence
        self.extra = list(extra)
        self.proc = None
        self.start()

    def args(self):
        a = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--daemonize", "no", "--logfile", os.path.join(self.dir, "log")]
        if self.persistence == "aof":
            a += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            a += ["--appendonly", "no"]
        return a + self.extra

    def start(self):
        self.proc = subprocess.Popen(self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if command(self.port, "PING", timeout=0.5) == b"PONG":
                    return
            except (OSError, RuntimeError):
                # LOADING while the AOF is read back, or not listening yet.
                pass
            time.sleep(0.02)
        raise RuntimeError("redis-server on port %d did not start" % self.port)

    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def command(self, *args):
        return command(self.port, *args)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def wipe(self):
        """Forget every byte on disk (a restart without persistence)."""
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif name != "log":
                os.remove(path)

    def close(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Proxy:
    """A TCP proxy on a free loopback port. black_hole(True): bytes stop
    flowing both ways (silence, not a reset) until black_hole(False).
    retarget(port): new connections go there, and the current ones are
    dropped (clients reconnect, as after a failover)."""

    def __init__(self, target_port):
        self.target = target_port
        self.hole = threading.Event()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def black_hole(self, on):
        if on:
            self.hole.set()
        else:
            self.hole.clear()

    def retarget(self, port):
        with self.lock:
            self.target = port
            pairs, self.pairs = self.pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=2)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a, b):
        peers = {a: b, b: a}
        try:
            while not self.closed:
                if self.hole.is_set():
                    time.sleep(0.005)
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.05)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    peers[s].sendall(data)
        except OSError:
            pass
        finally:
            a.close()
            b.close()

    def close(self):
        self.closed = True
        self.listener.close()
        self.retarget(self.target)
