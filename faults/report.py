"""The suite's output: one row per fault class (JSON and a markdown table) and
a timeline picture per class."""

import json
import os
import platform
import time

COLUMNS = [("runs", "runs"), ("acquisitions", "acquisitions"), ("overlaps", "overlaps"),
           ("double_grants", "double grants"), ("stale_accepted", "stale accepted"),
           ("stale_rejected", "stale rejected"), ("unfenced_lost_updates", "unfenced lost updates"),
           ("loss_notice", "loss notice ms p50/p99/max"), ("takeover", "takeover ms p50/p99")]


def _fmt(value):
    return "-" if value is None else "%.1f" % value


def summarise(fault_class, runs):
    def total(key):
        return sum(r[key] for r in runs)

    notices = [n for r in runs for n in _values(r, "loss")]
    takeovers = [n for r in runs for n in _values(r, "takeover")]
    from check import percentile
    return dict(
        name=fault_class.name, description=fault_class.description, in_contract=fault_class.in_contract,
        safe_with=fault_class.safe_with, runs=len(runs), acquisitions=total("acquisitions"),
        overlaps=total("overlaps"), double_grants=total("double_grants"), stale_accepted=total("stale_accepted"),
        stale_rejected=total("stale_rejected"), unfenced_lost_updates=total("unfenced_lost_updates"),
        loss_notice_ms=dict(p50=percentile(notices, 50), p99=percentile(notices, 99),
                            max=max(notices) if notices else None, count=len(notices)),
        takeover_ms=dict(p50=percentile(takeovers, 50), p99=percentile(takeovers, 99), count=len(takeovers)),
        double_grant_examples=[d for r in runs for d in r["double_grant_details"]][:5],
        stale_accepted_examples=[d for r in runs for d in r["stale_accepted_details"]][:5],
    )


def _values(run, which):
    import check
    sections = run["sections"]
    if which == "loss":
        paused = [f for f in run["faults"] if f["kind"] == "pause-holder"]
        return check.loss_notice_ms(sections, paused)
    return check.takeovers_ms(run["faults"])


def row_text(row):
    notice, take = row["loss_notice_ms"], row["takeover_ms"]
    return ("%s: %d acquisitions, %d overlaps, %d double grants, %d stale accepted, %d stale rejected, "
            "%d unfenced lost updates; loss notice p50/p99/max %s/%s/%s ms; takeover p50/p99 %s/%s ms" % (
                row["name"], row["acquisitions"], row["overlaps"], row["double_grants"], row["stale_accepted"],
                row["stale_rejected"], row["unfenced_lost_updates"], _fmt(notice["p50"]), _fmt(notice["p99"]),
                _fmt(notice["max"]), _fmt(take["p50"]), _fmt(take["p99"])))


def markdown(summary):
    lines = ["| class | in contract | " + " | ".join(title for _, title in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    for row in summary:
        notice, take = row["loss_notice_ms"], row["takeover_ms"]
        cells = [str(row[k]) for k, _ in COLUMNS[:7]]
        cells.append("%s / %s / %s" % (_fmt(notice["p50"]), _fmt(notice["p99"]), _fmt(notice["max"])))
        cells.append("%s / %s" % (_fmt(take["p50"]), _fmt(take["p99"])))
        lines.append("| %s | %s | %s |" % (row["name"], "yes" if row["in_contract"] else "no", " | ".join(cells)))
    notes = [row for row in summary if not row["in_contract"]]
    if notes:
        lines.append("")
        for row in notes:
            lines.append("- **%s** is outside the contract; safe with %s." % (row["name"], row["safe_with"]))
    return "\n".join(lines)


def write(summary, out):
    meta = dict(machine=platform.node(), processor=platform.processor() or platform.machine(),
                cores=os.cpu_count(), date=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(dict(meta=meta, classes=summary), f, indent=2)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("Run on %s (%s cores), %s.\n\n" % (meta["machine"], meta["cores"], meta["date"]))
        f.write(markdown(summary) + "\n")


def timeline(fault_class, run, path):
    """One row per client, critical sections as bars (green while entitled,
    grey past entitlement), faults shaded, double grants marked red."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    t0 = run["started"]
    clients = sorted(run["clients"])
    rows = {c: i for i, c in enumerate(clients)}
    fig, ax = plt.subplots(figsize=(12, 1 + 0.5 * len(clients)))
    for fault in run["faults"]:
        ax.axvspan(fault["start"] - t0, max(fault["end"], fault["start"] + 0.02) - t0, color="#f2c14e", alpha=0.35,
                   lw=0)
    for s in run["sections"]:
        y = rows[s["client"]]
        entitled = max(0.0, s["entitled_until"] - s["start"])
        ax.broken_barh([(s["start"] - t0, entitled)], (y - 0.35, 0.7), color="#3a7d44")
        if s["last_seen"] > s["entitled_until"]:
            ax.broken_barh([(s["entitled_until"] - t0, s["last_seen"] - s["entitled_until"])], (y - 0.35, 0.7),
                           color="#b0b0b0")
    for d in run["double_grant_details"]:
        ax.axvline(d["at"] - t0, color="red", lw=1.5)
    ax.set_yticks(range(len(clients)))
    ax.set_yticklabels(["%s (%s)" % (c, run["clients"][c]) for c in clients])
    ax.set_xlabel("seconds since the run began")
    ax.set_title("%s: %s\ngreen: holding and entitled; grey: past entitlement; yellow: fault; red: double grant"
                 % (fault_class.name, fault_class.description), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
