#!/usr/bin/env python3
"""The bonus pool, in Python: 4 processes x 25 threads race for 10 bonuses.

    PYTHONPATH=build/default/python python3 examples/python/bonus_pool.py [URL]
        [--processes 4] [--threads 25] [--bonuses 10]

Each client reads how many bonuses are left, "works" for a moment, and takes
one if any was left: a read-modify-write on Redis that only a lock makes
safe. The race runs twice on one pool: with a dlock lock (exactly the
bonuses awarded, none overdrawn, each winner's fencing token larger than the
last) and without one (lost updates: more awarded than there were).

With no URL (and no DLOCK_URL or REDIS_URL) it starts its own redis-server
on a free loopback port and stops it at the end, as `dlock demo` does.
Exit status 0 when the locked race awarded exactly the pool.
"""
import argparse
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import dlock

POOL = "bonus:left"
WINNERS = "bonus:winners"
WORK_S = 0.002  # between reading the pool and taking a bonus


def client_thread(client, lock, label, start_at):
    time.sleep(max(0.0, start_at - time.time()))
    if lock is None:
        take_bonus(client, label, 0)
        return
    with lock:
        take_bonus(client, label, lock.fencing_token)


def take_bonus(client, label, token):
    left = int(client.command("GET", POOL))
    if left <= 0:
        return
    time.sleep(WORK_S)
    client.command("SET", POOL, left - 1)
    client.command("RPUSH", WINNERS, "%s %d" % (label, token))


def client_process(url, index, threads, use_lock, start_at):
    # A process's own Client: one per process, shared by its threads (each
    # thread is its own owner of the lock).
    with dlock.Client(url) as client:
        lock = client.lock("bonus:lock", lease=10.0) if use_lock else None
        workers = [threading.Thread(target=client_thread, args=(client, lock, "p%d-t%d" % (index, t), start_at))
                   for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()


def race(url, args, use_lock):
    with dlock.Client(url) as client:
        client.command("SET", POOL, args.bonuses)
        client.command("DEL", WINNERS)
        start_at = time.time() + 1.0  # every process races together
        context = multiprocessing.get_context("spawn")
        processes = [context.Process(target=client_process, args=(url, i, args.threads, use_lock, start_at))
                     for i in range(args.processes)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
            if p.exitcode != 0:
                raise SystemExit("a client process failed (exit %s)" % p.exitcode)
        winners = [w.decode().split() for w in client.command("LRANGE", WINNERS, 0, -1)]
        return winners, int(client.command("GET", POOL))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis():
    directory = tempfile.mkdtemp(prefix="dlock-bonus-")
    log = os.path.join(directory, "redis.log")
    port = free_port()
    server = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                               "--appendonly", "no", "--dir", directory, "--logfile", log],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(log) and "Ready to accept connections" in open(log).read():
            print("started redis-server on redis://127.0.0.1:%d (pid %d)" % (port, server.pid))
            return server, directory, "redis://127.0.0.1:%d" % port
        if server.poll() is not None:
            break
        time.sleep(0.01)
    os.kill(server.pid, signal.SIGKILL)
    server.wait()
    raise SystemExit("redis-server did not start (is it installed? apt-get install redis-server)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default=os.environ.get("DLOCK_URL") or os.environ.get("REDIS_URL"))
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=25)
    parser.add_argument("--bonuses", type=int, default=10)
    args = parser.parse_args()
    server = directory = None
    url = args.url
    if url is None:
        server, directory, url = start_redis()
    try:
        clients = args.processes * args.threads
        print("\n%d clients (%d processes x %d threads) race for %d bonuses.\n"
              % (clients, args.processes, args.threads, args.bonuses))
        winners, left = race(url, args, use_lock=True)
        print("With dlock:\n  #   client      fencing token")
        for i, (label, token) in enumerate(winners, 1):
            print("  %-3d %-11s %s" % (i, label, token))
        tokens = [int(token) for _, token in winners]
        increasing = all(a < b for a, b in zip(tokens, tokens[1:]))
        overdrawn = len(winners) - args.bonuses if len(winners) > args.bonuses else 0
        ok = len(winners) == args.bonuses and left == 0 and increasing
        print("  awarded %d of %d, overdrawn by %d, fencing tokens %s"
              % (len(winners), args.bonuses, overdrawn, "strictly increasing" if increasing else "NOT increasing"))
        winners, left = race(url, args, use_lock=False)
        print("\nWithout a lock (same race, same pool):")
        if len(winners) > args.bonuses:
            print("  awarded %d of %d: overdrawn by %d; the pool still shows %d left (lost updates)"
                  % (len(winners), args.bonuses, len(winners) - args.bonuses, left))
        else:
            print("  awarded %d of %d (this time the race did not overdraw)" % (len(winners), args.bonuses))
        return 0 if ok else 1
    finally:
        if server is not None:
            os.kill(server.pid, signal.SIGKILL)
            server.wait()
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
