"""The checker: from the clients' logs and the storage, what happened.

A critical section runs from its "acquired" line (written after the lock
call returned) to its "releasing" line (written before unlock was called):
inside the true hold on both ends. A holder is *entitled* until the earliest
of: the end of the section, its valid_until (library clients), the loss
signal it received, or the SIGTERM dlock sent its command (`dlock run`
clients). A *double grant* is two sections of different clients that overlap
while both were entitled, where at least one of them is exclusive (a lock,
a multi-lock, a read-write lock's write side): what a lock must never allow.
Two readers of a read-write lock may overlap. Permits of a semaphore are
counted instead: a double grant is an instant at which the entitled holders
hold more permits than the semaphore's limit. Overlaps past
entitlement are expected under pauses (a paused holder cannot stop in time);
the fenced storage must then reject the late writer, and the unfenced
control shows what happens without fencing."""

import json
import math


def read_log(path):
    events = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except ValueError:
                # The last line of a process killed mid-write.
                pass
    return events


def sections(client, events):
    """The critical sections of one client's log."""
    out, current = [], None
    for e in events:
        ev = e["ev"]
        if ev == "acquired":
            current = dict(client=client, token=e["token"], start=e["t"], end=None, valid_until=e.get("valid_until"),
                           side=e.get("side", "exclusive"), permits=e.get("permits", 1), limit=e.get("limit"),
                           lost=None, lost_valid_until=None, sigterm=None, wrote=False, accepted=None,
                           lost_while_releasing=None)
            out.append(current)
        elif current is None:
            continue
        elif ev == "write":
            current["wrote"] = True
            current["accepted"] = e["accepted"]
        elif ev == "lost" and current["end"] is not None:
            # Heard while unlocking (the release found the lease gone): the
            # holder had stopped using the lock already.
            current["lost_while_releasing"] = e["t"]
        elif ev == "lost" and current["lost"] is None:
            current["lost"] = e["t"]
            current["lost_valid_until"] = e.get("valid_until")
        elif ev == "sigterm":
            current["sigterm"] = e["t"]
        elif ev == "releasing":
            current["end"] = e["t"]
            if e.get("valid_until"):
                current["valid_until"] = e["valid_until"]
        elif ev in ("released", "end"):
            current = None
    for s in out:
        ends = [t for t in (s["end"], s["valid_until"], s["lost"], s["sigterm"], s["lost_valid_until"]) if t]
        # A section that never logged its end (killed) is entitled until its
        # validity or signal at most; with none known, until its last line.
        s["entitled_until"] = min(ends) if ends else s["start"]
        s["last_seen"] = max(t for t in (s["end"], s["lost"], s["sigterm"], s["start"]) if t)
    return out


def double_grants(all_sections):
    found = []
    ordered = sorted((s for s in all_sections if s["side"] != "permit"), key=lambda s: s["start"])
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b["start"] >= a["entitled_until"]:
                break
            if a["client"] == b["client"] or (a["side"] == "shared" and b["side"] == "shared"):
                continue
            overlap = min(a["entitled_until"], b["entitled_until"]) - b["start"]
            if overlap > 0:
                found.append(dict(first=a["client"], second=b["client"], at=b["start"], overlap_ms=overlap * 1000,
                                  tokens=[a["token"], b["token"]]))
    return found + over_limit([s for s in all_sections if s["side"] == "permit"])


def over_limit(permit_sections, until="entitled_until"):
    """Instants at which entitled holders (or, with until="last_seen", holders
    entitled or not) held more permits than the limit:
    a sweep over the starts and entitlement ends, an end before a start at
    the same instant (a permit given back and taken again is no overlap)."""
    found, held, holders = [], 0, {}
    edges = sorted([(s["start"], 1, i) for i, s in enumerate(permit_sections)] +
                   [(s[until], 0, i) for i, s in enumerate(permit_sections) if s[until] > s["start"]])
    for t, starting, i in edges:
        s = permit_sections[i]
        if not starting:
            if holders.pop(i, None) is not None:
                held -= s["permits"]
            continue
        if s[until] <= s["start"]:
            continue
        holders[i] = s
        held += s["permits"]
        limit = s["limit"]
        if limit is not None and held > limit:
            found.append(dict(first=None, second=s["client"], at=t, overlap_ms=0, tokens=[s["token"]],
                              permits_held=held, limit=limit,
                              holders=sorted({h["client"] for h in holders.values()})))
    return found


def stale_accepted(accepted_entries):
    """Accepted fenced writes whose token another writer also used, or that
    came after a larger token: neither may ever be accepted."""
    bad, owner_of, largest = [], {}, -1
    for entry in accepted_entries:
        token_text, writer = entry.decode().split(" ", 1)
        token = int(token_text)
        if token < largest or owner_of.setdefault(token, writer) != writer:
            bad.append(dict(token=token, writer=writer))
        largest = max(largest, token)
    return bad


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[k]


def loss_notice_ms(all_sections, paused):
    """Loss signal minus the end of validity, for holders that were running
    (a paused process hears nothing until it resumes): negative is early."""
    out = []
    for s in all_sections:
        if s["lost"] is None or not s["lost_valid_until"]:
            continue
        if any(p["client"] == s["client"] and p["start"] <= s["lost"] and p["end"] >= s["start"] for p in paused):
            continue
        out.append((s["lost"] - s["lost_valid_until"]) * 1000)
    return out


def takeovers_ms(faults):
    """From a holder's death to the next grant, as the suite saw it on the
    lock server; a death after which no grant came within three leases
    counts as infinite."""
    return [f["takeover_ms"] if f["takeover_ms"] is not None else math.inf
            for f in faults if f["kind"] == "kill-holder"]


def check(logs, accepted, rejected, counter, faults):
    """logs: {client: [events]}; faults: [{kind, client?, start, end}]."""
    all_sections = [s for client, events in logs.items() for s in sections(client, events)]
    grants = double_grants(all_sections)
    stale = stale_accepted(accepted)
    writes = sum(1 for events in logs.values() for e in events if e["ev"] == "write")
    paused = [f for f in faults if f["kind"] == "pause-holder"]
    notices = loss_notice_ms(all_sections, paused)
    takeovers = takeovers_ms(faults)
    return dict(
        acquisitions=len(all_sections),
        overlaps=sum(1 for i, a in enumerate(all_sections) for b in all_sections[i + 1:]
                     if a["client"] != b["client"] and "exclusive" in (a["side"], b["side"])
                     and a["start"] < b["last_seen"] and b["start"] < a["last_seen"])
        + len(over_limit([s for s in all_sections if s["side"] == "permit"], until="last_seen")),
        double_grants=len(grants),
        double_grant_details=grants[:20],
        stale_accepted=len(stale),
        stale_accepted_details=stale[:20],
        stale_rejected=len(rejected),
        unfenced_lost_updates=max(0, writes - counter),
        loss_notices=len(notices),
        loss_notice_ms=dict(p50=percentile(notices, 50), p99=percentile(notices, 99),
                            max=max(notices) if notices else None),
        takeovers=len(takeovers),
        takeover_ms=dict(p50=percentile(takeovers, 50), p99=percentile(takeovers, 99)),
        sections=all_sections,
    )
