"""The fault classes. Each sets up the lock servers its clients use, and
injects its fault while the workload runs; every fault is bounded in time.
`in_contract` says whether dlock promises exclusion under it (no double
grant); where it does not, `safe_with` names what makes it safe."""

import os
import random
import signal
import time

from infra import Endpoint, Proxy, RedisServer, command
from topologies import ClusterSet, SentinelSet


class FaultClass:
    name = ""
    description = ""
    in_contract = True
    safe_with = ""
    library_clients = 4
    cli_clients = 0
    # Whether the class can run against a server the user gave (--lock-url):
    # only classes whose faults hit clients, never the server.
    runs_on_any_server = False
    # What the library clients take (KINDS): a Lock unless a variant says.
    lock_kind = "lock"

    def __init__(self, run):
        self.run = run
        self.servers = []

    def lock_urls(self):
        """The URL (or the Redlock masters' URLs) each client's lock uses."""
        return [self.servers[0].url()]

    def url_for(self, index):
        return self.lock_urls()

    def work_ms_for(self, index, default):
        """How long client `index` works inside each critical section."""
        return default

    def client_args(self, index):
        """The library client's arguments for the lock kind it takes."""
        return KINDS[self.lock_kind]["args"](index)

    def setup(self):
        self.servers = [Endpoint(self.run.args.lock_url) if self.run.args.lock_url else RedisServer()]

    def inject(self):
        """Called once per fault period; records what it did."""

    def teardown(self):
        for s in self.servers:
            s.close()


def pause_for(run):
    return 2 * run.lease


def outage(run, servers, take_down, bring_up, seconds, kind):
    """Takes servers down, keeps them down for `seconds`, brings them back."""
    start = time.time()
    for s in servers:
        take_down(s)
    time.sleep(seconds)
    for s in servers:
        bring_up(s)
    run.record(kind, start)


def kill_and_forget(server):
    server.kill()
    server.wipe()


class HolderPause(FaultClass):
    name = "holder-pause"
    description = "a library client is SIGSTOPped inside its critical section past its lease, then resumed"
    runs_on_any_server = True
    kind = "library"

    def signal(self, client, signo):
        os.kill(client.pid, signo)

    def inject(self):
        client = self.run.holder(kind=self.kind)
        start = time.time()
        self.signal(client, signal.SIGSTOP)
        time.sleep(pause_for(self.run))
        self.signal(client, signal.SIGCONT)
        self.run.record("pause-holder", start, client=client.id)


class HolderPauseCli(HolderPause):
    name = "holder-pause-cli"
    description = "a `dlock run` holder and its command are SIGSTOPped past the lease, then resumed"
    runs_on_any_server = True
    in_contract = False
    safe_with = ("fencing: a stopped `dlock run` cannot signal its command before it resumes, so the command's "
                 "entitlement (until SIGTERM) outlives the lease; the fenced storage rejects its late writes")
    library_clients = 2
    cli_clients = 2
    kind = "cli"

    def signal(self, client, signo):
        # The client's whole process group: dlock and its command.
        os.killpg(client.pid, signo)


def long_holder(index, default, run):
    """Client 0 holds for longer than a lease, so that it still holds when a
    fault takes its lease away: the loss notice is measured on it."""
    return int(run.lease * 1500) if index == 0 else default


class ServerPause(FaultClass):
    name = "server-pause"
    description = "the lock server is SIGSTOPped past the lease, then resumed"
    library_clients = 2  # the long holder must get the lock often enough to be holding at the fault

    def work_ms_for(self, index, default):
        return long_holder(index, default, self.run)

    def inject(self):
        self.run.holder(kind="library", prefer="c0", wait=self.run.period / 2, fresh=True)
        outage(self.run, self.servers[:1], RedisServer.pause, RedisServer.resume, pause_for(self.run), "pause-server")


class ServerRestartAof(FaultClass):
    name = "server-kill-aof"
    description = "the lock server (appendonly, appendfsync always) is killed -9 and restarted"

    def setup(self):
        self.servers = [RedisServer(persistence="aof")]

    def inject(self):
        outage(self.run, self.servers[:1], RedisServer.kill, RedisServer.start, 0, "restart-server")


class ServerRestartEmpty(FaultClass):
    name = "server-kill-empty"
    description = "the lock server (no persistence) is killed -9 and restarted empty"
    in_contract = False
    safe_with = ("persistence (appendfsync always), or replicas with replica_ack: a server that forgets a held "
                 "lock lets another client in until the holder's next renewal reports the loss; fencing tokens "
                 "stay increasing (floored at the server clock), so fenced writes stay safe")

    def inject(self):
        outage(self.run, self.servers[:1], kill_and_forget, RedisServer.start, 0, "restart-server")


class ScriptFlush(FaultClass):
    name = "script-flush"
    description = "SCRIPT FLUSH on the lock server every 200 ms"

    def inject(self):
        start = time.time()
        until = start + self.run.period / 2
        while time.time() < until:
            command(self.servers[0].port, "SCRIPT", "FLUSH")
            time.sleep(0.2)
        self.run.record("script-flush", start)


class Failover(FaultClass):
    name = "failover"
    description = "the master is killed -9 and its replica promoted (clients reach it through a proxy)"
    in_contract = False
    safe_with = ("replica_ack (the failover-ack class): without it, a grant the replica had not yet received is "
                 "lost at the failover and another client is let in")
    replica_ack = 0
    faults_per_run = 1

    def setup(self):
        master = RedisServer(extra=["--repl-diskless-sync-delay", "0"])
        replica = RedisServer(extra=["--replicaof", "127.0.0.1", str(master.port)])
        self.servers = [master, replica]
        deadline = time.time() + 20
        while time.time() < deadline:
            command(master.port, "SET", "probe", "1")
            if command(master.port, "WAIT", 1, 200) == 1:
                break
        self.proxy = Proxy(master.port)

    def lock_urls(self):
        return [self.proxy.url()]

    def inject(self):
        if getattr(self, "failed_over", False):
            return
        self.failed_over = True
        start = time.time()
        self.servers[0].kill()
        promoted = self.servers[1]
        command(promoted.port, "REPLICAOF", "NO", "ONE")
        self.proxy.retarget(promoted.port)
        self.run.record("failover", start)
        # A new replica for the new master, as an operator would add one:
        # with replica_ack, nothing can be acquired until it has synced.
        self.servers.append(RedisServer(extra=["--replicaof", "127.0.0.1", str(promoted.port)]))

    def teardown(self):
        self.proxy.close()
        super().teardown()


class FailoverAck(Failover):
    name = "failover-ack"
    description = "as failover, with LockOptions::replica_ack = 1 replica"
    in_contract = True
    safe_with = ""
    replica_ack = 1


class TopologyFailover(FaultClass):
    """A master of a Sentinel deployment or a cluster is killed -9 once per
    run, its replica promoted, and the old master brought back empty as a
    replica; clients follow through their URL alone."""
    in_contract = False
    replica_ack = 0
    topology = None  # SentinelSet or ClusterSet

    deployment = None

    def setup(self):
        self.servers = []
        self.deployment = self.topology()

    def lock_urls(self):
        return [self.deployment.url()]

    def inject(self):
        start = time.time()
        self.deployment.kill_master_and_return("dlock:{%s}" % self.run.lock_name)
        self.run.record(self.name.replace("-ack", ""), start)

    def teardown(self):
        if self.deployment:
            self.deployment.close()


class SentinelFailover(TopologyFailover):
    name = "sentinel-failover"
    description = ("the master of a Sentinel deployment is killed -9; the sentinels promote its replica and "
                   "clients follow through their redis-sentinel:// URL; the old master returns as a replica")
    safe_with = ("replica_ack (the sentinel-failover-ack class): without it, a grant the replica had not yet "
                 "received is lost at the failover and another client is let in")
    topology = SentinelSet


class SentinelFailoverAck(SentinelFailover):
    name = "sentinel-failover-ack"
    description = "as sentinel-failover, with LockOptions::replica_ack = 1 replica"
    in_contract = True
    safe_with = ""
    replica_ack = 1


class ClusterFailover(TopologyFailover):
    name = "cluster-failover"
    description = ("the cluster master serving the lock's slot is killed -9; its replica takes over and clients "
                   "follow through their redis-cluster:// URL; the old master returns as a replica")
    safe_with = ("replica_ack (the cluster-failover-ack class): without it, a grant the replica had not yet "
                 "received is lost at the failover and another client is let in")
    topology = ClusterSet


class ClusterFailoverAck(ClusterFailover):
    name = "cluster-failover-ack"
    description = "as cluster-failover, with LockOptions::replica_ack = 1 replica"
    in_contract = True
    safe_with = ""
    replica_ack = 1


class BlackHole(FaultClass):
    name = "black-hole"
    description = "the network between one holder and the server goes silent past the lease, then heals"
    library_clients = 2

    def setup(self):
        super().setup()
        self.proxy = Proxy(self.servers[0].port)

    def url_for(self, index):
        # Client 0 goes through the proxy; the others reach the server directly.
        return [self.proxy.url()] if index == 0 else self.lock_urls()

    def work_ms_for(self, index, default):
        return long_holder(index, default, self.run)

    def inject(self):
        self.run.holder(kind="library", prefer="c0", wait=self.run.period / 2, fresh=True)
        start = time.time()
        self.proxy.black_hole(True)
        time.sleep(pause_for(self.run))
        self.proxy.black_hole(False)
        self.run.record("black-hole", start, client="c0")

    def teardown(self):
        self.proxy.close()
        super().teardown()


class RedlockBase(FaultClass):
    def setup(self):
        self.servers = [RedisServer() for _ in range(5)]

    def lock_urls(self):
        return [s.url() for s in self.servers]


class RedlockPause(RedlockBase):
    name = "redlock-pause-2"
    description = "Redlock over 5 masters: 2 masters SIGSTOPped past the lease, then resumed"

    def inject(self):
        outage(self.run, random.sample(self.servers, 2), RedisServer.pause, RedisServer.resume, pause_for(self.run),
               "pause-server")


class RedlockRestart(RedlockBase):
    name = "redlock-restart-2"
    description = "Redlock over 5 masters: 2 killed -9 and restarted empty one lease later (Redlock's delayed restart)"

    def inject(self):
        outage(self.run, random.sample(self.servers, 2), kill_and_forget, RedisServer.start, self.run.lease * 1.2,
               "restart-server")


class RedlockRestartHeld(RedlockBase):
    name = "redlock-restart-held"
    description = "Redlock over 5 masters: one master killed -9 and restarted empty at once while a lock is held"
    in_contract = False
    safe_with = ("persistence (appendfsync always) on the masters, or Redlock's delayed restart (the "
                 "redlock-restart-2 class): a master that comes back empty at once forgets a grant, and when the "
                 "holder had a bare majority another client can win one with that master")

    def inject(self):
        self.run.holder(kind="library")
        outage(self.run, random.sample(self.servers, 1), kill_and_forget, RedisServer.start, 0, "restart-server")


class CliKill(FaultClass):
    name = "cli-kill9"
    description = "a `dlock run` holder is killed -9 inside its critical section (its command dies with it)"
    runs_on_any_server = True
    library_clients = 2
    cli_clients = 2

    def inject(self):
        client = self.run.holder(kind="cli")
        pid = client.current_dlock_pid()
        if pid is None:
            return
        server = self.servers[0]
        token = server.command("HGET", "dlock:{%s}" % self.run.lock_name, "token")
        start = time.time()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        # The takeover as the server sees it: the next grant (a new token).
        # Clients' own logs would add their start-up (a `dlock run` command
        # logs its acquisition only once it runs).
        takeover = None
        while time.time() < start + 3 * self.run.lease:
            now = server.command("HGET", "dlock:{%s}" % self.run.lock_name, "token")
            if now is not None and now != token:
                takeover = (time.time() - start) * 1000
                break
            time.sleep(0.002)
        self.run.record("kill-holder", start, client=client.id, takeover_ms=takeover)


# The lock kinds the library clients can take, and how each client is told.
KINDS = {
    "lock": dict(what="", args=lambda index: []),
    "fair": dict(what="clients take a fair lock (one line on the server, direct grant)",
                 args=lambda index: ["--kind", "fair"]),
    "multi": dict(what="clients hold a multi-lock over three names, each listing them in its own order",
                  args=lambda index: ["--kind", "multi"]),
    "rw": dict(what="clients 0 and 2 take a read-write lock's read side, 1 and 3 its write side",
               args=lambda index: ["--kind", "read" if index % 2 == 0 else "write"]),
    "permit": dict(what="clients hold one of 2 permits of a semaphore (4 clients: contended)",
                   args=lambda index: ["--kind", "permit", "--limit", "2"]),
}


def for_kind(base, kind):
    """The same fault with the clients taking another lock kind."""
    return type(base.__name__ + kind.title(), (base,),
                dict(name=kind + "-" + base.name, description=base.description + "; " + KINDS[kind]["what"],
                     lock_kind=kind))


ALL = [HolderPause, HolderPauseCli, ServerPause, ServerRestartAof, ServerRestartEmpty, ScriptFlush, Failover,
       FailoverAck, SentinelFailover, SentinelFailoverAck, ClusterFailover, ClusterFailoverAck, BlackHole,
       RedlockPause, RedlockRestart, RedlockRestartHeld, CliKill]
# Every lock kind faces the pauses and restarts.
ALL += [for_kind(base, kind) for kind in KINDS if kind not in ("lock", "fair")
        for base in (HolderPause, ServerPause, ServerRestartAof, ServerRestartEmpty)]
# The fair lock, whose grants the release and the line's refreshes make on
# the server, faces every single-server class in the contract.
ALL += [for_kind(base, "fair") for base in (HolderPause, ServerPause, ServerRestartAof, ServerRestartEmpty,
                                            ScriptFlush, FailoverAck, BlackHole)]
