#!/usr/bin/env python3
"""Tables (markdown) from driver.py's results.json.  python3 summarize.py [results.json]"""
import json, statistics, sys

d = json.load(open(sys.argv[1] if len(sys.argv) > 1 else 'results.json'))
rounds = d['rounds']
VARS = ['today', 'packed', 'packed_fcall', 'packed_lenient', 'packed_todayargs', 'bare', 'bare_notime']
med = statistics.median


def per_round(tag, label):
    return [r['median'].get(tag, {}).get(label, [None])[0] for r in rounds]


def floor_sl(r):  # floor lock+unlock from SLOWLOG medians in round r
    return med(r['median']['floor']['floor_set']) + med(r['median']['floor']['floor_unlock'])


def floor_nl(r):
    return med(r['nolog']['floor']['floor'])


def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return '—'
    return '%.1f' % med(xs) if min(xs) == max(xs) else '%.1f (%.0f–%.0f)' % (med(xs), min(xs), max(xs))


print('Redis %s, %d rounds x %d iterations per loop; load average at each round start: %s; at the end: %s\n' % (
    d['redis_version'], len(rounds), d['iters'],
    ', '.join('%.1f' % l[0] for l in d['load'][:-1]), '%.1f' % d['load'][-1][0]))

print('### Floor\n')
print('| | per round |\n|---|---|')
print('| SET NX PX, SLOWLOG median µs | %s |' % ' '.join('%.1f' % med(r['median']['floor']['floor_set']) for r in rounds))
print('| EVALSHA compare-and-delete, SLOWLOG median µs | %s |' %
      ' '.join('%.1f' % med(r['median']['floor']['floor_unlock']) for r in rounds))
print('| lock+unlock, SLOWLOG off, commandstats µs/iteration (median of 8 chunks) | %s |' %
      ' '.join('%.2f' % floor_nl(r) for r in rounds))
print()

# ---- lock+unlock totals
print('### Lock+unlock of one name, totals and ratio to the floor of the same round\n')
print('SLOWLOG: sum of the two scripts\' medians (threshold 0: each command a script runs is logged too, '
      'inside its time). Off: commandstats µs per lock+unlock with SLOWLOG off (median of 8 chunks of 250). '
      'Ratios: per round against that round\'s floor, median (min–max) over rounds.\n')
print('Least: the least of the rounds\' SLOWLOG-off figures (a chunk the machine preempted only adds), '
      'against the least floor of the run.\n')
FLOOR_LEAST = min(floor_nl(r) for r in rounds)
print('| variant | case | SLOWLOG µs | ratio | SLOWLOG off µs | ratio | least µs | ratio |\n|---|---|---|---|---|---|---|---|')
cases = [('same_owner', 'name used before, same owner', ['acq_used', 'rel_final'], 1),
         ('two_owners', 'name last released by another owner', ['acq_other', 'rel_final_a'], 2),
         ('new_name', 'new name', ['acq_new', 'rel_final_new'], 1)]
for tag in VARS:
    for path, what, labels, div in cases:
        sl, slr, nl, nlr = [], [], [], []
        for r in rounds:
            if tag not in r['median'] or labels[0] not in r['median'][tag]:
                continue
            if path == 'two_owners':
                s = r['median'][tag]['acq_other'][0] + (r['median'][tag]['rel_final_a'][0] +
                                                        r['median'][tag]['rel_final_b'][0]) / 2
            else:
                s = sum(r['median'][tag][l][0] for l in labels)
            sl.append(s); slr.append(s / floor_sl(r))
            n = r['nolog'][tag][path][0] / div
            nl.append(n); nlr.append(n / floor_nl(r))
        if sl:
            print('| %s | %s | %s | %s | %s | %s | %.1f | %.1f |' % (tag, what, fmt(sl), fmt(slr), fmt(nl), fmt(nlr),
                                                               min(nl), min(nl) / FLOOR_LEAST))
print()

# ---- per path
print('### Per path: SLOWLOG median µs (median over rounds, min–max), ratio to the floor\'s lock+unlock\n')
rows = [('fresh grant, name used before (same owner)', 'acq_used'),
        ('fresh grant, name last released by another owner', 'acq_other'),
        ('fresh grant, new name', 'acq_new'),
        ('final release, nobody waits', 'rel_final'),
        ('final release, new name', 'rel_final_new'),
        ('re-entry', 'acq_reenter'),
        ('release of a re-entry', 'rel_reentry'),
        ('busy answer (one owner tries again and again)', 'busy'),
        ('fresh grant, contended loop (then B busy)', 'acq_c'),
        ('busy answer, first of the hold (sets w)', 'busy_c'),
        ('final release after a busy answer (line looked at, published)', 'rel_w'),
        ('fresh grant, 6 owners in turn (spilled tombstones)', 'acq_many'),
        ('final release, 6 owners in turn (spills one)', 'rel_many'),
        ('renewal', 'renew')]
tags = [t for t in VARS if not t.startswith('bare')]
print('| path | ' + ' | '.join(tags) + ' |\n|---|' + '---|' * len(tags))
for what, label in rows:
    cells = []
    for tag in tags:
        xs = per_round(tag, label)
        rs = [x / floor_sl(r) for x, r in zip(xs, rounds) if x is not None]
        cells.append('%s [%s×]' % (fmt(xs), fmt(rs)) if rs else '—')
    print('| %s | %s |' % (what, ' | '.join(cells)))
print()
for tag in ('bare', 'bare_notime'):
    print('%s (lower bound, not a lock): ' % tag + ', '.join(
        '%s %s' % (label, fmt(per_round(tag, label))) for label in ('acq_used', 'rel_final', 'acq_new', 'rel_final_new')))
print()

# ---- per path, SLOWLOG off
print('### Per loop, SLOWLOG off: commandstats µs per iteration (median over rounds, min–max)\n')
loops = ['same_owner', 'two_owners', 'new_name', 'reentry', 'busy', 'renew', 'contended', 'many_owners']
print('loops: same_owner = lock+unlock; two_owners = 2 lock+unlock; reentry = fresh, re-entry, release 1, release 1; '
      'busy = one busy answer; renew = one renewal; contended = A lock, B busy, A unlock; many_owners = lock+unlock by 6 owners in turn\n')
print('| loop | floor | ' + ' | '.join(VARS) + ' |\n|---|---|' + '---|' * len(VARS))
for loop in loops:
    cells = []
    for tag in VARS:
        xs = [r['nolog'].get(tag, {}).get(loop, [None])[0] for r in rounds]
        cells.append(fmt(xs))
    print('| %s | %s | %s |' % (loop, fmt([floor_nl(r) for r in rounds]), ' | '.join(cells)))
print()

# ---- commands
print('### Commands per iteration of each loop (INFO commandstats deltas, last round)\n')
last = rounds[-1]['stats']
for tag in ['floor'] + VARS:
    for loop, st in sorted(last.get(tag, {}).items()):
        calls = {c: v for c, v in st.items() if c != 'inner_slowlog_median_us'}
        inner = st.get('inner_slowlog_median_us', {})
        print('- %s / %s: %s; inner SLOWLOG medians µs: %s' % (
            tag, loop, ', '.join('%s %.2f (%.2f µs/call)' % (c, v[0], v[1]) for c, v in sorted(calls.items())),
            ', '.join('%s %.0f' % kv for kv in sorted(inner.items()))))
print()

# ---- entry and codecs
print('### Script entry and single commands (SLOWLOG medians µs, per round)\n')
for k in rounds[0]['entry']:
    print('- %s: %s' % (k, ' '.join('%.0f' % r['entry'][k] for r in rounds)))
print()
print('### Codecs (codec_bench.lua; SLOWLOG median µs of one EVALSHA; per-op = (200 reps − 1 rep)/199)\n')
print('| codec | parse, 1 rep | parse+pack, 1 rep | parse per op µs | parse+pack per op µs |\n|---|---|---|---|---|')
for c in ('none', 'text_match', 'text_find', 'struct', 'msgpack'):
    def g(mode, reps):
        return [r['codec']['%s/%s/%d' % (c, mode, reps)] for r in rounds]
    p1, b1 = g('parse', 1), g('both', 1)
    pp = [(a - b) / 199 for a, b in zip(g('parse', 200), p1)]
    bp = [(a - b) / 199 for a, b in zip(g('both', 200), b1)]
    print('| %s | %s | %s | %s | %s |' % (c, fmt(p1), fmt(b1), '%.2f (%.2f–%.2f)' % (med(pp), min(pp), max(pp)),
                                         '%.2f (%.2f–%.2f)' % (med(bp), min(bp), max(bp))))
print()
print('sample free record after two owners (packed):', repr(d['sample_record']))
