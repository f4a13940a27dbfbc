"""Test support for dlock's Python module: a private redis-server per test
file (each file is one pytest process and one CTest test, so files run side
by side), on a free loopback port, stopped by pid at the end, as the C++
suite's support/redis_server.cpp does."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

import dlock


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dlock-py-redis-")
        self.log = os.path.join(self.dir, "redis.log")
        self.process = None
        for attempt in range(5):
            self.port = free_port()
            try:
                self._start()
                return
            except RuntimeError:
                if attempt == 4:
                    raise  # the port was taken between free_port() and the bind, five times

    def _start(self):
        open(self.log, "w").close()
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", self.log, "--daemonize", "no", "--protected-mode", "no"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30  # generous: a loaded machine
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("redis-server exited at start:\n" + open(self.log).read())
            if "Ready to accept connections" in open(self.log).read():
                return
            time.sleep(0.005)
        self.stop()
        raise RuntimeError("redis-server did not become ready within 30 s")

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server():
    s = RedisServer()
    yield s
    s.close()


@pytest.fixture
def client(server):
    with dlock.Client(server.url) as c:
        yield c


@pytest.fixture
def name():
    """A lock name no other test uses."""
    return "py-test:" + uuid.uuid4().hex[:12]


def eventually(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def dlock_bin():
    """The dlock command: DLOCK_BIN (CTest sets it), else the build tree's."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("DLOCK_BIN") or os.path.join(here, "..", "..", "build", "default", "tools", "dlock", "dlock")


def python_child(code, url, *args):
    """A Python process running code (with dlock importable), stdout piped."""
    env = dict(os.environ, DLOCK_URL=url, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
