#!/usr/bin/env python3
"""dlock's fault-injection suite: K clients (library processes and `dlock run`
processes) take one lock again and again while a fault class is injected,
and a checker says whether two of them ever both held it while entitled.

    run_faults.py BUILD_DIR [--quick] [--out DIR] [--lock-url URL] [CLASS...]

With --lock-url, the classes whose faults hit only clients run against that
server (the lock name is unique per run; its keys expire after the
retention); the others need servers of their own and are skipped.

Exit status 1 when a class inside dlock's contract shows a double grant, or
any class shows a stale fenced write accepted. See faults/README.md."""

import argparse
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402
import classes  # noqa: E402
import report  # noqa: E402
from infra import RedisServer, command  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class Client:
    def __init__(self, id, kind, proc, log):
        self.id, self.kind, self.proc, self.log = id, kind, proc, log

    @property
    def pid(self):
        return self.proc.pid

    def events(self):
        return check.read_log(self.log) if os.path.exists(self.log) else []

    def in_section(self, within=None):
        """Inside a critical section (that began at most `within` seconds ago)."""
        for e in reversed(self.events()):
            if e["ev"] == "acquired":
                return within is None or time.time() - e["t"] <= within
            if e["ev"] in ("releasing", "released", "start", "end", "sigterm"):
                return False
        return False

    def current_dlock_pid(self):
        for e in reversed(self.events()):
            if e["ev"] == "spawned":
                return e["pid"]
        return None


class Run:
    def __init__(self, fault_class, args, index, out_dir):
        self.cls = fault_class(self)
        self.args = args
        self.index = index
        self.lease = args.lease_ms / 1000
        self.period = args.period
        self.out_dir = out_dir
        self.faults = []
        self.clients = []
        # Unique, for a server the user gave that others may use too.
        self.lock_name = "dlock-faults:%d:%s:%d" % (os.getpid(), fault_class.name, index)

    def record(self, kind, start, client=None, **details):
        self.faults.append(dict(kind=kind, start=start, end=time.time(), client=client, **details))

    def holder(self, kind, prefer=None, wait=None, fresh=False):
        """A client of that kind inside its critical section (waits up to
        `wait`, default one lease, for one; else any client of that kind).
        fresh: one that acquired in the last 200 ms, so that it still holds
        when the fault begins."""
        candidates = [c for c in self.clients if c.kind == kind]
        if prefer:
            candidates = [c for c in candidates if c.id == prefer] or candidates
        until = time.time() + (wait if wait is not None else self.lease)
        while time.time() < until:
            holding = [c for c in candidates if c.in_section(0.2 if fresh else None)]
            if holding:
                return holding[0]
            time.sleep(0.005)
        return random.choice(candidates)

    def start_clients(self, storage, sha, seconds):
        build = self.args.build_dir
        cls = self.cls
        for i in range(cls.library_clients + cls.cli_clients):
            id = "c%d" % i
            log = os.path.join(self.out_dir, "%s-run%d-%s.log" % (cls.name, self.index, id))
            for stale in (log, log + ".stderr"):
                if os.path.exists(stale):
                    os.remove(stale)
            work_ms = cls.work_ms_for(i, self.args.work_ms)
            if i < cls.library_clients:
                # Spaces between masters: a Sentinel or Cluster URL has commas of its own.
                argv = [os.path.join(build, "faults", "dlock_fault_client"), "--lock", " ".join(cls.url_for(i)),
                        "--storage",
                        storage.url(), "--name", self.lock_name, "--id", id, "--log", log, "--fenced-sha", sha,
                        "--lease-ms", str(self.args.lease_ms), "--seconds", str(seconds), "--work-ms",
                        str(work_ms)]
                argv += cls.client_args(i)
                if getattr(cls, "replica_ack", 0):
                    argv += ["--replica-ack", str(cls.replica_ack), "--ack-timeout-ms", "200"]
                kind = "library"
            else:
                argv = [sys.executable, os.path.join(HERE, "cli_client.py"),
                        os.path.join(build, "tools", "dlock", "dlock"), ",".join(cls.url_for(i)), self.lock_name, str(self.args.lease_ms),
                        str(seconds), log, str(storage.port), sha, id, str(work_ms)]
                kind = "cli"
            proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL,
                                    stderr=open(log + ".stderr", "w"))
            self.clients.append(Client(id, kind, proc, log))

    def execute(self):
        cls = self.cls
        storage = RedisServer()
        try:
            cls.setup()
            with open(os.path.join(HERE, "fenced_write.lua")) as f:
                sha = command(storage.port, "SCRIPT", "LOAD", f.read()).decode()
            seconds = self.args.seconds
            self.start_clients(storage, sha, seconds)
            started = time.time()
            time.sleep(min(1.0, self.period / 2))  # every client has begun
            while time.time() - started < seconds - self.period:
                cls.inject()
                rest = self.period - (time.time() - started) % self.period
                time.sleep(max(0.1, rest))
            for c in self.clients:
                try:
                    c.proc.wait(timeout=seconds + 30)
                except subprocess.TimeoutExpired:
                    c.proc.kill()
                    c.proc.wait()
            logs = {c.id: c.events() for c in self.clients}
            accepted = command(storage.port, "LRANGE", "fenced:accepted", 0, -1)
            rejected = command(storage.port, "LRANGE", "fenced:rejected", 0, -1)
            counter = int(command(storage.port, "GET", "control:counter") or 0)
            result = check.check(logs, accepted, rejected, counter, self.faults)
            result["faults"] = self.faults
            result["started"] = started
            result["clients"] = {c.id: c.kind for c in self.clients}
            with open(os.path.join(self.out_dir, "%s-run%d.json" % (cls.name, self.index)), "w") as f:
                json.dump(result, f, indent=1)
            return result
        finally:
            for c in self.clients:
                if c.proc.poll() is None:
                    os.killpg(c.proc.pid, 9)
                    c.proc.wait()
            cls.teardown()
            storage.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir")
    parser.add_argument("classes", nargs="*", help="fault classes (default: all): "
                        + ", ".join(c.name for c in classes.ALL))
    parser.add_argument("--quick", action="store_true", help="one short run per class (CI)")
    parser.add_argument("--out", default="build/faults")
    parser.add_argument("--lock-url", help="run the client-fault classes against this redis:// server")
    parser.add_argument("--report-only", action="store_true",
                        help="no runs: rebuild the summary and timelines from the runs saved in --out")
    args = parser.parse_intermixed_args()
    chosen = [c for c in classes.ALL if not args.classes or c.name in args.classes]
    if args.lock_url:
        skipped = [c.name for c in chosen if not c.runs_on_any_server]
        chosen = [c for c in chosen if c.runs_on_any_server]
        if skipped:
            print("with --lock-url, skipping (they fault servers of their own): " + ", ".join(skipped))
    unknown = set(args.classes) - {c.name for c in classes.ALL}
    if unknown:
        parser.error("unknown class: " + ", ".join(sorted(unknown)))
    args.lease_ms = 1000
    args.work_ms = 40
    args.runs = 1 if args.quick else 3
    args.seconds = 10 if args.quick else 24
    args.period = 3.0
    os.makedirs(args.out, exist_ok=True)

    summary = []
    failed = False
    for fault_class in chosen:
        runs = []
        for index in range(args.runs):
            if args.report_only:
                path = os.path.join(args.out, "%s-run%d.json" % (fault_class.name, index))
                if os.path.exists(path):
                    with open(path) as f:
                        runs.append(json.load(f))
                continue
            print("== %s, run %d of %d" % (fault_class.name, index + 1, args.runs), flush=True)
            runs.append(Run(fault_class, args, index, args.out).execute())
        if not runs:
            continue
        row = report.summarise(fault_class, runs)
        summary.append(row)
        report.timeline(fault_class, runs[0], os.path.join(args.out, fault_class.name + ".png"))
        print(report.row_text(row), flush=True)
        if row["stale_accepted"] or (fault_class.in_contract and row["double_grants"]):
            failed = True
    report.write(summary, args.out)
    print("\n" + report.markdown(summary))
    print("results in %s (summary.json, summary.md, one timeline per class)" % args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
