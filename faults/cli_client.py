"""A `dlock run` client of the fault suite: runs cli_section.py under the lock
again and again until its time is up, and logs how each run ended.

    cli_client.py DLOCK LOCK_URL KEY LEASE_MS SECONDS LOG STORAGE_PORT FENCED_SHA WRITER WORK_MS"""

import json
import os
import subprocess
import sys
import time

dlock, url, key, lease_ms, seconds, log_path, storage_port, sha, writer, work_ms = sys.argv[1:11]
section = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli_section.py")


def log(event, **fields):
    with open(log_path, "a") as f:
        f.write(json.dumps(dict(ev=event, t=time.time(), **fields)) + "\n")


log("start", id=writer, pid=os.getpid(), lease_ms=int(lease_ms), cli=True)
end = time.monotonic() + float(seconds)
while time.monotonic() < end - 0.05:
    wait_ms = int((end - time.monotonic()) * 1000)
    child = subprocess.Popen([dlock, "--url", url, "-q", "run", "--ttl", lease_ms + "ms", "--wait", "%dms" % wait_ms,
                              "--grace", "100ms", key, "--", sys.executable, section, log_path, storage_port, sha,
                              writer, work_ms], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log("spawned", pid=child.pid)  # the dlock process: the holder a fault may kill
    status = child.wait()
    log("released", exit=status)
    if status == 75:  # not acquired before the end
        break
    time.sleep(0.005)
log("end")
