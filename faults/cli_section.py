"""The command a `dlock run` client runs under the lock: the same critical
section as dlock_fault_client's (the unfenced control, then the fenced
write), with the token from DLOCK_FENCING_TOKEN. A SIGTERM (dlock's word
that the lease was lost) is logged and ends it at once.

    cli_section.py LOG STORAGE_PORT FENCED_SHA WRITER WORK_MS"""

import json
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from infra import command  # noqa: E402

log_path, storage_port, sha, writer, work_ms = sys.argv[1:6]
storage_port, work_ms = int(storage_port), int(work_ms)


def log(event, **fields):
    with open(log_path, "a") as f:
        f.write(json.dumps(dict(ev=event, t=time.time(), **fields)) + "\n")


def on_term(_signum, _frame):
    log("sigterm")
    os._exit(143)


signal.signal(signal.SIGTERM, on_term)
token = int(os.environ["DLOCK_FENCING_TOKEN"])
log("acquired", token=token)
before = command(storage_port, "GET", "control:counter")
value = int(before) if before is not None else 0
time.sleep(random.uniform(work_ms / 2, work_ms * 1.5) / 1000)
command(storage_port, "SET", "control:counter", value + 1)
accepted = command(storage_port, "EVALSHA", sha, 3, "fenced:largest", "fenced:accepted", "fenced:rejected",
                   token, writer)
log("write", token=token, read=value, accepted=accepted == 1)
log("releasing", token=token, held=True)
