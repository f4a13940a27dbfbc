#!/usr/bin/env python3
"""Where a small script's time goes: EVALSHA of scripts that add one piece at a time,
server us per call from INFO commandstats (SLOWLOG off), median of chunks, variants interleaved.
  nice -n 10 python3 probe.py [--rounds 5]"""
import argparse, os, random, statistics, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from driver import Resp, private_server, commandstats, OWNER_A, LABEL

SCRIPTS = {
    'return1': "return 1",
    'get': "local v = redis.call('GET', KEYS[1]) return 1",
    'get_set': "local v = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], ARGV[1], 'PX', 600000) return 1",
    'get_time_set': "local v = redis.call('GET', KEYS[1]) local t = redis.call('TIME') "
                    "redis.call('SET', KEYS[1], ARGV[1], 'PX', 600000) return 1",
    'get_del': open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'bench', 'floor_unlock.lua')).read(),  # the floor's unlock
    'set_only': "redis.call('SET', KEYS[1], ARGV[1], 'PX', 600000) return 1",
    'set_short': "redis.call('SET', KEYS[1], 'tok', 'PX', 600000) return 1",
    'set_nopx': "redis.call('SET', KEYS[1], ARGV[1]) return 1",
    'set_px_str': "redis.call('SET', KEYS[1], ARGV[1], 'PX', '600000') return 1",
    'set_px_argv': "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[#ARGV]) return 1",
    'pexpire_only': "redis.call('PEXPIRE', KEYS[1], 600000) return 1",
    'time_only': "local t = redis.call('TIME') return 1",
    'concat11': "local a = ARGV[1] local s = 'P1|' .. a .. '|' .. a .. '|' .. a .. '|' .. a .. '|' .. a .. '|' .. a return 1",
    'closures7': "local function a() end local function b() end local function c() end local function d() end "
                 "local function e() end local function f() end local function g() end return 1",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--iters', type=int, default=2000)
    args = ap.parse_args()
    with private_server('--slowlog-log-slower-than', '-1') as r:
        sha = {n: r.call('SCRIPT', 'LOAD', s).decode() for n, s in SCRIPTS.items()}
        value = 'P1|1795331927095183|1795331957095||' + OWNER_A + '|1|1042||||' + LABEL + '\n' + OWNER_A + ' 1041'
        r.call('SET', 'k', value)
        argsets = {'1a': [value, '600000'], '7a': [value, '30000', '1042', 'fresh', '600000', LABEL, '600000']}
        res = {}
        for _ in range(args.rounds):
            work = [(n, a) for n in SCRIPTS for a in argsets] + [('plain_set', None), ('plain_set_big', None),
                                                                 ('floor', None), ('floor', None)]
            random.shuffle(work)
            for n, a in work:
                if n == 'floor':  # SET NX PX + EVALSHA compare-and-delete, per pair
                    chunks = []
                    for _ in range(args.iters // 250):
                        b = commandstats(r)
                        r.pipeline([c for _ in range(250) for c in (['SET', 'fl', 'tok', 'NX', 'PX', '30000'],
                                                                     ['EVALSHA', sha['get_del'], 1, 'fl', 'tok'])])
                        e = commandstats(r)
                        chunks.append(sum(e[t][1] - b.get(t, (0, 0))[1] for t in ('set', 'evalsha')) / 250)
                    res.setdefault('floor_pair', []).append(statistics.median(chunks))
                    continue
                if n == 'plain_set':
                    cmd, top = ['SET', 'f', 'tok', 'PX', '30000'], 'set'
                elif n == 'plain_set_big':
                    cmd, top = ['SET', 'f', value, 'PX', '30000'], 'set'
                else:
                    cmd, top = ['EVALSHA', sha[n], 1, 'k'] + argsets[a], 'evalsha'
                chunks = []
                for _ in range(args.iters // 250):
                    b = commandstats(r); rep = r.pipeline([cmd] * 250); e = commandstats(r)
                    assert not isinstance(rep[0], RuntimeError), rep[0]
                    chunks.append((e[top][1] - b.get(top, (0, 0))[1]) / 250)
                res.setdefault('%s/%s' % (n, a) if a else n, []).append(statistics.median(chunks))
        print('load %s' % (os.getloadavg(),))
        for k in sorted(res):
            print('%-20s %s  min %.2f' % (k, ' '.join('%.2f' % x for x in res[k]), min(res[k])))


if __name__ == '__main__':
    main()
