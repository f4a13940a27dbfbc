#!/usr/bin/env python3
"""Behaviour checks of the packed prototype (packed_*.lua as EVALSHA), on a private redis-server.
Each check prints ok / FAIL with what it saw.   nice -n 10 python3 selftest.py"""
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from driver import Resp, private_server, packed_sources, LABEL

fails = 0


def expect(what, got, want):
    global fails
    ok = want(got) if callable(want) else got == want
    fails += not ok
    print('%-4s %-75s %r' % ('ok' if ok else 'FAIL', what, got))
    return got


def main():
    with private_server() as r:
        evals, library = packed_sources()
        sha = {n: r.call('SCRIPT', 'LOAD', s).decode() for n, s in evals.items()}
        r.call('FUNCTION', 'LOAD', 'REPLACE', library)
        key = 'dlock:{t}'

        def acq(owner, op, mode='fresh', lease='30000', retention='600000'):
            return r.pipeline([['EVALSHA', sha['acquire'], 1, key, owner, lease, op, mode, retention, '1', LABEL]])[0]

        def rel(owner, op, n='all', lease='30000', retention='600000'):
            return r.pipeline([['EVALSHA', sha['release'], 1, key, owner, lease, op, n, retention, '', '1500', '1']])[0]

        def renew(owner, lease='30000'):
            return r.pipeline([['EVALSHA', sha['renew'], 1, key, owner, lease, '600000', '0']])[0]

        g = expect('A fresh grant of a new name', acq('A', 10), lambda x: x[0] == 1 and x[2] == 1)
        t1 = g[1]
        now_us = int(r.call('TIME')[0]) * 10**6
        expect('  its token is floored at the server clock', t1, lambda x: x >= now_us - 10**6)
        expect('A resent copy of that grant answers the same', acq('A', 10), [1, t1, 1])
        expect('B busy', acq('B', 20), lambda x: x[0] == 0 and 0 < x[1] <= 30000)
        expect('B renew refused (not holder)', renew('B'), 0)
        expect('B release refused (not holder)', rel('B', 21), -1)
        expect('A re-entry', acq('A', 11, 'reenter'), [1, t1, 2])
        expect('A late copy of older op', acq('A', 9, 'reenter'), [-2])
        expect('A renew', renew('A'), 1)
        expect('A release of the re-entry', rel('A', 12, '1'), 1)
        expect('A final release', rel('A', 13), 0)
        expect('  the free record keeps token and tombstones; TTL <= retention',
               (r.call('GET', key), r.call('PTTL', key)), lambda x: x[1] <= 600000 and b'|' in x[0])
        expect('A resent copy of the final release answers 0', rel('A', 13), 0)
        expect('B late copy of its busy-answered attempt (op 20) never grants', acq('B', 20), [-2])
        expect('A late copy of its old acquisition (op 10) never grants', acq('A', 10), [-2])
        g = expect('B fresh grant (new op)', acq('B', 22), lambda x: x[0] == 1)
        expect('  token strictly increased', g[1], lambda x: x > t1)
        t2 = g[1]
        expect('B final release', rel('B', 23), 0)
        expect('A (not the last releaser) late copy of op 13-or-older still refused', acq('A', 11), [-2])
        # tombstones pushed out of the list (TOMBS = 4) go to keys of their own
        for i, o in enumerate(['C', 'D', 'E', 'F']):
            expect('%s grant+release' % o, (acq(o, 100 + 2 * i)[0], rel(o, 101 + 2 * i)), (1, 0))
        expect('  spilled tombstone keys exist', sorted(k.decode() for k in r.call('KEYS', key + ':done:*')),
               lambda x: len(x) >= 1)
        expect('A late copy after A was pushed out of the list: still refused', acq('A', 12), [-2])
        expect('B late copy: still refused', acq('B', 22), [-2])
        # holder dies: lease 50 ms, retention 1 s
        g = expect('G fresh grant, lease 50 ms', acq('G', 300, lease='50', retention='1000'), lambda x: x[0] == 1)
        t3 = g[1]
        time.sleep(0.08)
        expect('G renew after its lease ended: refused', renew('G'), 0)
        g = expect('H grants after G\'s lease ended', acq('H', 400), lambda x: x[0] == 1)
        expect('  token increased', g[1], lambda x: x > t3)
        expect('G late copy of its acquisition (taken over) refused', acq('G', 300), [-2])
        expect('H final release', rel('H', 401), 0)
        # counter lost (record gone): token still above the last one, floored at TIME
        last = g[1]
        r.call('DEL', key)
        g = expect('A grant after the record was lost', acq('A', 500), lambda x: x[0] == 1)
        expect('  token still above the last one issued', g[1], lambda x: x > last)
        expect('A final release', rel('A', 501), 0)
        # FCALL runs the same code
        g = r.pipeline([['FCALL', 'p_acquire', 1, key, 'Z', '30000', '900', 'fresh', '600000', '1', LABEL]])[0]
        expect('FCALL p_acquire grants', g, lambda x: x[0] == 1)
        expect('FCALL p_release releases', r.pipeline([['FCALL', 'p_release', 1, key, 'Z', '30000', '901', 'all',
                                                         '600000', '', '1500', '1']])[0], 0)
        # old layout on the same key: refused, not overwritten
        r.call('DEL', key)
        r.call('HSET', key, 'owner', 'OLD', 'count', '1')
        expect('a layout-2 hash on the key: the packed script errors (WRONGTYPE)', acq('A', 600),
               lambda x: isinstance(x, RuntimeError))
        expect('  the hash is untouched', r.call('HGET', key, 'owner'), b'OLD')
    print('%d failed' % fails)
    sys.exit(1 if fails else 0)


if __name__ == '__main__':
    main()
