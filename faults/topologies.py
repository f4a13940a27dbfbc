"""A Sentinel deployment and a Redis Cluster for the fault suite, from
private redis-server processes on free loopback ports (stopped by pid).
Clients reach them with nothing but a redis-sentinel:// or redis-cluster://
URL, as users do."""

import os
import subprocess
import time

from infra import RedisServer, command


def wait_for(check, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, RuntimeError, ValueError):
            pass
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


class Sentinel(RedisServer):
    """A sentinel watching `master_port` as `name` (quorum 2, down after 400 ms)."""

    def __init__(self, name, master_port):
        self.conf_text = ("sentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %s 400\n"
                          "sentinel failover-timeout %s 2000\nsentinel parallel-syncs %s 1\n"
                          % (name, master_port, name, name, name))
        super().__init__()

    def args(self):
        conf = os.path.join(self.dir, "sentinel.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write(self.conf_text)
        return ["redis-server", conf, "--sentinel", "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                self.dir, "--daemonize", "no", "--logfile", os.path.join(self.dir, "log")]


class SentinelSet:
    """One master, one replica, three sentinels."""

    name = "faults"

    def __init__(self):
        self.nodes = [RedisServer(extra=["--repl-diskless-sync-delay", "0"])]
        self.nodes.append(RedisServer(extra=["--replicaof", "127.0.0.1", str(self.nodes[0].port)]))
        self.sentinels = [Sentinel(self.name, self.nodes[0].port) for _ in range(3)]
        wait_for(lambda: all(self._sees_everything(s) for s in self.sentinels), 30, "the sentinels to agree")

    def _sees_everything(self, sentinel):
        fields = command(sentinel.port, "SENTINEL", "master", self.name)
        info = dict(zip(fields[::2], fields[1::2]))
        return info[b"num-other-sentinels"] == b"2" and info[b"num-slaves"] == b"1"

    def url(self):
        return "redis-sentinel://" + ",".join("127.0.0.1:%d" % s.port for s in self.sentinels) + "#" + self.name

    def master_port(self):
        for s in self.sentinels:
            try:
                return int(command(s.port, "SENTINEL", "get-master-addr-by-name", self.name)[1])
            except (OSError, RuntimeError, TypeError):
                continue
        raise RuntimeError("no sentinel names a master")

    def node(self, port):
        return next(n for n in self.nodes if n.port == port)

    def kill_master_and_return(self, key=None):
        """kill -9 of the master (whatever key); once the sentinels promote the replica, the
        old master comes back empty and the sentinels make it a replica."""
        old = self.master_port()
        self.node(old).kill()
        self.node(old).wipe()
        wait_for(lambda: self.master_port() != old and
                 command(self.master_port(), "ROLE")[0] == b"master", 30, "a new master")
        self.node(old).start()
        return old

    def close(self):
        for s in self.sentinels + self.nodes:
            s.close()


class ClusterSet:
    """Three masters with one replica each."""

    def __init__(self):
        extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
                 "--repl-diskless-sync-delay", "0"]
        self.nodes = [self._node(extra) for _ in range(6)]
        subprocess.run(["redis-cli", "--cluster", "create"] + ["127.0.0.1:%d" % n.port for n in self.nodes] +
                       ["--cluster-replicas", "1", "--cluster-yes"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True, timeout=60)
        self.wait_ok()

    @staticmethod
    def _node(extra):
        # A cluster node also listens on its port + 10000 (the cluster bus):
        # a port above 55535 cannot be one; such a node fails to start.
        for _ in range(20):
            try:
                return RedisServer(extra=extra)
            except RuntimeError:
                continue
        raise RuntimeError("no cluster node would start")

    def wait_ok(self):
        wait_for(lambda: all(b"cluster_state:ok" in command(n.port, "CLUSTER", "INFO")
                             for n in self.nodes if n.proc.poll() is None), 30, "cluster_state:ok")

    def url(self):
        return "redis-cluster://" + ",".join("127.0.0.1:%d" % n.port for n in self.nodes[:3])

    def master_for_key(self, key):
        for n in self.nodes:
            if n.proc.poll() is not None:
                continue
            slot = command(n.port, "CLUSTER", "KEYSLOT", key)
            for entry in command(n.port, "CLUSTER", "SLOTS"):
                if entry[0] <= slot <= entry[1]:
                    return int(entry[2][1])
        raise RuntimeError("no live node")

    def node(self, port):
        return next(n for n in self.nodes if n.port == port)

    def kill_master_and_return(self, key):
        """kill -9 of the master serving key; its replica takes over, and the
        old master comes back empty and rejoins as a replica."""
        old = self.master_for_key(key)
        node = self.node(old)
        node.kill()
        wait_for(lambda: self.master_for_key(key) != old, 30, "the replica's promotion")
        # Back with its node id (nodes.conf) but no data: it rejoins as a replica.
        for name in os.listdir(node.dir):
            if name not in ("log", "nodes.conf"):
                os.remove(os.path.join(node.dir, name))
        node.start()
        self.wait_ok()
        return old

    def close(self):
        for n in self.nodes:
            n.close()
