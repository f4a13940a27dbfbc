#!/usr/bin/env python3
"""Packed-layout feasibility driver.

Starts a private redis-server on a free loopback port (no persistence), loads
today's scripts (as the build assembles them: build/default/generated/dlock_scripts.hpp,
from cmake/GenerateScriptsHeader.cmake; --scripts-header for another) and the packed prototype (packed_*.lua, as EVALSHA and as
a Redis Function library), runs each lock path in tight pipelined loops and reads
every command's duration from SLOWLOG (threshold 0, 1 us resolution) plus
INFO commandstats deltas. Variants are interleaved within each round.

  nice -n 10 python3 driver.py [--rounds 5] [--iters 2000] [--out results.json]
"""
import argparse, contextlib, json, os, random, re, signal, socket, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the source tree
SCRIPTS_HEADER = os.path.join(ROOT, 'build', 'default', 'generated', 'dlock_scripts.hpp')
OWNER_A = '5f0c3a9e8d2b4c7e9a1f6b3d2e8c4a70:t1'
OWNER_B = '9b1e7d3c5a2f4e6b8d0c1a3e5f7b9d20:t1'
LABEL = 'host=app1 pid=4242 thread=140234'
LEASE, RETENTION, WAITER = '30000', '600000', '1500'


# ---------------------------------------------------------------- RESP client
class Resp:
    def __init__(self, port):
        self.s = socket.create_connection(('127.0.0.1', port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b''

    @staticmethod
    def enc(args):
        out = [b'*%d\r\n' % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b'$%d\r\n%s\r\n' % (len(a), a))
        return b''.join(out)

    def _line(self):
        while True:
            i = self.buf.find(b'\r\n')
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def _fill(self):
        chunk = self.s.recv(1 << 20)
        if not chunk:
            raise IOError('server closed the connection')
        self.buf += chunk

    def _read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b'+':
            return rest.decode()
        if t == b'-':
            return RuntimeError(rest.decode())
        if t == b':':
            return int(rest)
        if t == b'$':
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if t == b'*':
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise IOError('bad reply %r' % line)

    def pipeline(self, cmds):
        self.s.sendall(b''.join(self.enc(c) for c in cmds))
        return [self._read() for _ in cmds]

    def call(self, *args):
        r = self.pipeline([args])[0]
        if isinstance(r, RuntimeError):
            raise r
        return r


@contextlib.contextmanager
def private_server(*extra, server='redis-server'):
    """A redis-server of its own on a free loopback port (no persistence),
    niced; yields a connection to it and stops it by its pid."""
    probe = socket.socket()
    probe.bind(('127.0.0.1', 0))
    port = probe.getsockname()[1]
    probe.close()
    proc = subprocess.Popen(['nice', '-n', '10', server, '--port', str(port), '--bind', '127.0.0.1',
                             '--save', '', '--appendonly', 'no', *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print('redis-server pid %d port %d' % (proc.pid, port), file=sys.stderr)
    try:
        for _ in range(100):
            try:
                r = Resp(port)
                r.call('PING')
                break
            except (OSError, IOError):
                time.sleep(0.05)
        yield r
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# ---------------------------------------------------------------- scripts
def today_scripts():
    text = open(SCRIPTS_HEADER).read()
    out = {}
    for m in re.finditer(r'inline constexpr const char (\w+)_text\[\] = R"lua\((.*?)\)lua";', text, re.S):
        out[m.group(1)] = m.group(2)
    return out


def read(name):
    return open(os.path.join(HERE, name)).read()


def packed_sources():
    lib = read('packed_lib.lua')
    bodies = {n: read('packed_%s.lua' % n) for n in ('acquire', 'release', 'renew')}
    evals = {n: lib + '\n' + b for n, b in bodies.items()}
    fn = ['#!lua name=dlockpacked', lib]
    for n, b in bodies.items():
        fn.append("redis.register_function('p_%s', function(KEYS, ARGV)\n%s\nend)" % (n, b))
    return evals, '\n'.join(fn)


# ---------------------------------------------------------------- variants
class Today:
    """Today's scripts with the keys and arguments the C++ client sends
    (lock_acquisition.cpp send_acquire, hold.hpp ReleaseViews, lock_service.cpp renewal)."""
    tag = 'today'

    def __init__(self, r, shas):
        self.sha = shas

    @staticmethod
    def keys(name):
        lock = 'dlock:{%s}' % name
        return lock

    def acquire(self, name, owner, op, mode):
        lock = 'dlock:{%s}' % name
        k = [lock, lock + ':fence', lock + ':done:' + owner, lock + ':readers', 'dlock:sem:{%s}' % name,
             'dlock:sem:{%s}:waiters' % name, lock + ':line', lock + ':places']
        a = [owner, LEASE, op, mode, RETENTION, '1', LABEL, '', WAITER, '']
        return ['EVALSHA', self.sha['acquire'], len(k)] + k + a

    def release(self, name, owner, op, how_many):
        lock = 'dlock:{%s}' % name
        k = [lock, lock + ':fence', lock + ':ch', lock + ':done:' + owner, lock + ':line', lock + ':places']
        a = [owner, LEASE, op, how_many, RETENTION, '', WAITER]
        return ['EVALSHA', self.sha['release'], len(k)] + k + a

    def renew(self, name, owner):
        lock = 'dlock:{%s}' % name
        return ['EVALSHA', self.sha['renew'], 2, lock, lock + ':fence', owner, LEASE, RETENTION, '0']


class Packed:
    """The packed prototype: KEYS[1] only, today's ARGV order (+ strict flag on release)."""

    def __init__(self, r, shas, fcall=False, strict=True, full_args=False):
        self.sha, self.fcall, self.strict, self.full_args = shas, fcall, strict, full_args
        self.tag = ('packed_fcall' if fcall else 'packed') + ('' if strict else '_lenient') + \
                   ('_todayargs' if full_args else '')

    def _call(self, name, keys, args):
        if self.fcall:
            return ['FCALL', 'p_' + name, len(keys)] + keys + args
        return ['EVALSHA', self.sha[name], len(keys)] + keys + args

    def acquire(self, name, owner, op, mode):
        lock = 'dlock:{%s}' % name
        if self.full_args:
            k = [lock, lock + ':fence', lock + ':done:' + owner, lock + ':readers', 'dlock:sem:{%s}' % name,
                 'dlock:sem:{%s}:waiters' % name, lock + ':line', lock + ':places']
            a = [owner, LEASE, op, mode, RETENTION, '1', LABEL, '', WAITER, '']
        else:
            k = [lock]
            a = [owner, LEASE, op, mode, RETENTION, '1', LABEL]
        return self._call('acquire', k, a)

    def release(self, name, owner, op, how_many):
        lock = 'dlock:{%s}' % name
        strict = '1' if self.strict else '0'
        if self.full_args:
            k = [lock, lock + ':fence', lock + ':ch', lock + ':done:' + owner, lock + ':line', lock + ':places']
        else:
            k = [lock]
        return self._call('release', k, [owner, LEASE, op, how_many, RETENTION, '', WAITER, strict])

    def renew(self, name, owner):
        return self._call('renew', ['dlock:{%s}' % name], [owner, LEASE, RETENTION, '0'])


# ---------------------------------------------------------------- paths
class Ops:
    def __init__(self):
        self.n = {}

    def __call__(self, owner):
        self.n[owner] = self.n.get(owner, 1000) + 1
        return self.n[owner]


MANY = ['%032x:t%d' % (0x1234567890abcdef1234567890abcdef * (i + 3), i) for i in range(6)]
MANY_AT = [0]


def check(label, reply, want):
    ok = want(reply)
    if not ok:
        raise SystemExit('unexpected reply on %s: %r' % (label, reply))


granted = lambda r: isinstance(r, list) and r[0] == 1
granted1 = lambda r: isinstance(r, list) and r[0] == 1 and r[2] == 1
granted2 = lambda r: isinstance(r, list) and r[0] == 1 and r[2] == 2
busy = lambda r: isinstance(r, list) and r[0] == 0
is_int = lambda v: (lambda r: r == v)


def path_steps(path, v, ops, uniq):
    """One iteration of a path: a list of (label, command, check). Setup commands get label None."""
    if path == 'floor':
        name = 'floor:{%s}' % uniq
        return [('floor_set', ['SET', name, 'tok', 'NX', 'PX', LEASE], lambda r: r == 'OK'),
                ('floor_unlock', ['EVALSHA', FLOOR_SHA, 1, name, 'tok'], is_int(1))]
    if path == 'same_owner':   # fresh grant of a name used before (by the same owner) + final release
        name = v.tag + '-s'
        return [('acq_used', v.acquire(name, OWNER_A, ops(OWNER_A), 'fresh'), granted1),
                ('rel_final', v.release(name, OWNER_A, ops(OWNER_A), 'all'), is_int(0))]
    if path == 'two_owners':   # the name was last released by another owner
        name = v.tag + '-t'
        return [('acq_other', v.acquire(name, OWNER_A, ops(OWNER_A), 'fresh'), granted1),
                ('rel_final_a', v.release(name, OWNER_A, ops(OWNER_A), 'all'), is_int(0)),
                ('acq_other', v.acquire(name, OWNER_B, ops(OWNER_B), 'fresh'), granted1),
                ('rel_final_b', v.release(name, OWNER_B, ops(OWNER_B), 'all'), is_int(0))]
    if path == 'new_name':
        name = '%s-n%s' % (v.tag, uniq)
        return [('acq_new', v.acquire(name, OWNER_A, ops(OWNER_A), 'fresh'), granted1),
                ('rel_final_new', v.release(name, OWNER_A, ops(OWNER_A), 'all'), is_int(0))]
    if path == 'reentry':
        name = v.tag + '-r'
        return [(None, v.acquire(name, OWNER_A, ops(OWNER_A), 'fresh'), granted1),
                ('acq_reenter', v.acquire(name, OWNER_A, ops(OWNER_A), 'reenter'), granted2),
                ('rel_reentry', v.release(name, OWNER_A, ops(OWNER_A), '1'), is_int(1)),
                (None, v.release(name, OWNER_A, ops(OWNER_A), '1'), is_int(0))]
    if path == 'contended':    # B answered busy while A holds it: A's release looks at the line, publishes
        name = v.tag + '-c'
        return [('acq_c', v.acquire(name, OWNER_A, ops(OWNER_A), 'fresh'), granted1),
                ('busy_c', v.acquire(name, OWNER_B, ops(OWNER_B), 'fresh'), busy),
                ('rel_w', v.release(name, OWNER_A, ops(OWNER_A), 'all'), is_int(0))]
    if path == 'many_owners':  # six owners in turn: more than the record's 4 tombstones
        name = v.tag + '-m'
        MANY_AT[0] = (MANY_AT[0] + 1) % len(MANY)
        o = MANY[MANY_AT[0]]
        return [('acq_many', v.acquire(name, o, ops(o), 'fresh'), granted1),
                ('rel_many', v.release(name, o, ops(o), 'all'), is_int(0))]
    if path == 'busy':         # held by A (set up once), B answered busy
        name = v.tag + '-b'
        return [('busy', v.acquire(name, OWNER_B, ops(OWNER_B), 'fresh'), busy)]
    if path == 'renew':
        name = v.tag + '-h'
        return [('renew', v.renew(name, OWNER_A), is_int(1))]
    raise ValueError(path)


def setup(path, v, r, ops):
    if path in ('busy', 'renew'):
        name = v.tag + ('-b' if path == 'busy' else '-h')
        rep = r.pipeline([v.acquire(name, OWNER_A, ops(OWNER_A), 'fresh')])[0]
        if not granted(rep):
            raise SystemExit('setup of %s for %s: %r' % (path, v.tag, rep))


def teardown(path, v, r, ops):
    if path in ('busy', 'renew'):
        name = v.tag + ('-b' if path == 'busy' else '-h')
        rep = r.pipeline([v.release(name, OWNER_A, ops(OWNER_A), 'all')])[0]
        if rep != 0:
            raise SystemExit('teardown of %s for %s: %r' % (path, v.tag, rep))


def commandstats(r):
    info = r.call('INFO', 'commandstats').decode()
    out = {}
    for line in info.splitlines():
        m = re.match(r'cmdstat_([^:]+):calls=(\d+),usec=(\d+)', line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


def run_path(r, path, v, ops, iters, chunk=250):
    counter = [0]
    setup(path, v, r, ops)
    r.call('SLOWLOG', 'RESET')
    before = commandstats(r)
    r.call('SLOWLOG', 'RESET')
    labels = []
    done = 0
    while done < iters:
        n = min(chunk, iters - done)
        cmds, checks = [], []
        for _ in range(n):
            counter[0] += 1
            for label, cmd, want in path_steps(path, v, ops, '%d-%d' % (os.getpid(), next(UNIQ))):
                cmds.append(cmd)
                checks.append((label, want))
                labels.append(label)
        reps = r.pipeline(cmds)
        for (label, want), rep in zip(checks, reps):
            check('%s/%s/%s' % (v.tag, path, label), rep, want)
        done += n
    log = r.call('SLOWLOG', 'GET', '-1')
    after = commandstats(r)
    teardown(path, v, r, ops)
    # entries come newest first; keep the path's own commands, in order
    entries, inner = [], {}
    for e in reversed(log):
        cmd = e[3][0].decode().upper()
        if e[4] == b'?:0':  # a command a script ran
            inner.setdefault(cmd, []).append(e[2])
        elif cmd in ('EVALSHA', 'FCALL', 'SET'):
            entries.append(e[2])
    if len(entries) != len(labels):
        raise SystemExit('slowlog has %d entries for %d commands (%s/%s)' % (len(entries), len(labels), v.tag, path))
    per = {}
    for label, us in zip(labels, entries):
        if label:
            per.setdefault(label, []).append(us)
    skip = {'slowlog', 'info'}
    delta = {}
    for c, (calls, usec) in after.items():
        c0, u0 = before.get(c, (0, 0))
        if calls - c0 and c.split('|')[0] not in skip:
            delta[c] = ((calls - c0) / iters, (usec - u0) / max(calls - c0, 1))
    delta['inner_slowlog_median_us'] = {c: statistics.median(us) for c, us in inner.items()}
    return {label: statistics.median(us) for label, us in per.items()}, \
           {label: statistics.mean(us) for label, us in per.items()}, delta


def run_path_stats(r, path, v, ops, iters, chunk=250):
    """The same loop with SLOWLOG off (each command a script runs is otherwise logged too, inside
    the script's time): top-level server us per iteration from INFO commandstats, per chunk."""
    setup(path, v, r, ops)
    r.call('CONFIG', 'SET', 'slowlog-log-slower-than', '-1')
    top = ('evalsha', 'fcall', 'set') if path == 'floor' else ('evalsha', 'fcall')
    per_chunk = []
    done = 0
    try:
        while done < iters:
            n = min(chunk, iters - done)
            cmds, checks = [], []
            for _ in range(n):
                for label, cmd, want in path_steps(path, v, ops, '%d-%d' % (os.getpid(), next(UNIQ))):
                    cmds.append(cmd)
                    checks.append((label, want))
            b = commandstats(r)
            reps = r.pipeline(cmds)
            a = commandstats(r)
            for (label, want), rep in zip(checks, reps):
                check('%s/%s/%s' % (v.tag, path, label), rep, want)
            per_chunk.append(sum(a.get(c, (0, 0))[1] - b.get(c, (0, 0))[1] for c in top) / n)
            done += n
    finally:
        r.call('CONFIG', 'SET', 'slowlog-log-slower-than', '0')
    teardown(path, v, r, ops)
    return statistics.median(per_chunk)


def codec_records():
    """One representative record per codec (same fields) for codec_bench.lua."""
    token, deadline = 1795331927095183, 1795331957095
    tombs = [(OWNER_A, 1040), (OWNER_B, 2041), ('c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8:t3', 77),
             ('d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9:t9', 5)]
    text = 'P1|%d|%d|w|%s|1|1042||||%s' % (token, deadline, OWNER_B, LABEL) + \
           ''.join('\n%s %d' % t for t in tombs)
    return {'none': text, 'text_match': text, 'text_find': text}, tombs, (token, deadline)


def codec_binary(r, tombs, token, deadline):
    # built by the server's own struct / cmsgpack (the same libraries that read them)
    s = r.call('EVAL', """
      local t = {}
      for i = 3, #ARGV, 2 do t[#t + 1] = struct.pack('<sd', ARGV[i], tonumber(ARGV[i + 1])) end
      return struct.pack('<ddBsI4ddddsB', tonumber(ARGV[1]), tonumber(ARGV[2]), 1, KEYS[1], 1, 1042, 0, 0, 0,
                         KEYS[2], (#ARGV - 2) / 2) .. table.concat(t)""", 2, OWNER_B, LABEL, token, deadline,
               *[x for t in tombs for x in t])
    m = r.call('EVAL', """
      local t = {}
      for i = 3, #ARGV, 2 do t[#t + 1] = ARGV[i]; t[#t + 1] = tonumber(ARGV[i + 1]) end
      return cmsgpack.pack({tonumber(ARGV[1]), tonumber(ARGV[2]), 'w', KEYS[1], 1, 1042, 0, 0, 0, KEYS[2], t})""",
               2, OWNER_B, LABEL, token, deadline, *[x for t in tombs for x in t])
    return s, m


def run_codecs(r, sha, records, iters, reps_list=(1, 200)):
    out = {}
    order = [(c, reps, mode) for c in ('none', 'text_match', 'text_find', 'struct', 'msgpack')
             for reps in reps_list for mode in ('parse', 'both')]
    random.shuffle(order)
    for codec, reps, mode in order:
        n = iters if reps == 1 else max(iters // 20, 50)
        cmd = ['EVALSHA', sha, 0, codec, reps, records[codec], OWNER_A, mode]
        r.call('SLOWLOG', 'RESET')
        reps_ = r.pipeline([cmd] * n)
        if any(isinstance(x, RuntimeError) for x in reps_):
            raise SystemExit('codec %s: %r' % (codec, reps_[0]))
        log = r.call('SLOWLOG', 'GET', '-1')
        us = [e[2] for e in log if e[3][0].decode().upper() == 'EVALSHA' and e[4] != b'?:0']
        out['%s/%s/%d' % (codec, mode, reps)] = statistics.median(us)
    return out


UNIQ = iter(range(1, 1 << 62))
FLOOR_SHA = None


def main():
    global FLOOR_SHA, SCRIPTS_HEADER
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--iters', type=int, default=2000)
    ap.add_argument('--out', default=os.path.join(HERE, 'results.json'))
    ap.add_argument('--server', default='redis-server')
    ap.add_argument('--scripts-header', default=SCRIPTS_HEADER)
    args = ap.parse_args()
    SCRIPTS_HEADER = args.scripts_header
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that the server is stopped (finally)

    with private_server('--slowlog-log-slower-than', '0', '--slowlog-max-len', '100000', '--daemonize', 'no',
                        '--loglevel', 'warning', server=args.server) as r:
        version = r.call('INFO', 'server').decode()
        version = re.search(r'redis_version:(\S+)', version).group(1)
        FLOOR_SHA = r.call('SCRIPT', 'LOAD', open(os.path.join(ROOT, 'bench', 'floor_unlock.lua')).read()).decode()
        t = today_scripts()
        today_sha = {n: r.call('SCRIPT', 'LOAD', t[n]).decode() for n in ('acquire', 'release', 'renew')}
        evals, library = packed_sources()
        packed_sha = {n: r.call('SCRIPT', 'LOAD', s).decode() for n, s in evals.items()}
        r.call('FUNCTION', 'LOAD', 'REPLACE', library)
        codec_sha = r.call('SCRIPT', 'LOAD', read('codec_bench.lua')).decode()
        records, tombs, (token, deadline) = codec_records()
        records['struct'], records['msgpack'] = codec_binary(r, tombs, token, deadline)
        base_sha = {n: r.call('SCRIPT', 'LOAD', s).decode() for n, s in
                    {'return1': 'return 1', 'return1_lib': read('packed_lib.lua') + '\nreturn 1'}.items()}
        r.call('FUNCTION', 'LOAD', 'REPLACE', "#!lua name=base\nredis.register_function('ret1', function() return 1 end)")

        bare_sha = {n: r.call('SCRIPT', 'LOAD', read('bare_%s.lua' % n)).decode() for n in ('acquire', 'release')}
        bare = Packed(r, bare_sha)
        bare.tag = 'bare'
        bare_nt_sha = {n: r.call('SCRIPT', 'LOAD', read('bare_notime_%s.lua' % n)).decode()
                       for n in ('acquire', 'release')}
        bare_nt = Packed(r, bare_nt_sha)
        bare_nt.tag = 'bare_notime'
        variants = [Today(r, today_sha), Packed(r, packed_sha), Packed(r, packed_sha, fcall=True),
                    Packed(r, packed_sha, strict=False), Packed(r, packed_sha, full_args=True), bare, bare_nt]
        paths = ['same_owner', 'two_owners', 'new_name', 'reentry', 'busy', 'renew', 'contended', 'many_owners']
        ops = Ops()
        results = {'redis_version': version, 'iters': args.iters, 'rounds': [], 'load': []}
        for rnd in range(args.rounds):
            results['load'].append(os.getloadavg())
            round_out = {'floor': {}, 'median': {}, 'mean': {}, 'stats': {}, 'codec': {}, 'entry': {}}
            work = [(p, v) for p in paths for v in variants
                    if not v.tag.startswith('bare') or p in ('same_owner', 'new_name')] + [('floor', None)] * 4
            random.shuffle(work)
            for path, v in work:
                vv = v or Packed(r, packed_sha)  # floor: variant unused
                med, mean, stats = run_path(r, path, vv, ops, args.iters)
                tag = 'floor' if v is None else v.tag
                for label, x in med.items():
                    round_out['median'].setdefault(tag, {}).setdefault(label, []).append(x)
                    round_out['mean'].setdefault(tag, {}).setdefault(label, []).append(mean[label])
                round_out['stats'].setdefault(tag, {})[path] = stats
                # setup/teardown iterations excluded; per-iteration top-level us, SLOWLOG off
                round_out.setdefault('nolog', {}).setdefault(tag, {}).setdefault(path, []).append(
                    run_path_stats(r, path, vv, ops, args.iters))
            # script entry alone: EVALSHA / FCALL of `return 1`, 1 key 1 arg and 8 keys 10 args
            for what, cmd in [('evalsha_1k1a', ['EVALSHA', base_sha['return1'], 1, 'k', 'a']),
                              ('evalsha_8k10a', ['EVALSHA', base_sha['return1'], 8] + ['k%d' % i for i in range(8)] +
                               ['a%d' % i for i in range(10)]),
                              ('evalsha_lib_1k1a', ['EVALSHA', base_sha['return1_lib'], 1, 'k', 'a']),
                              ('fcall_1k1a', ['FCALL', 'ret1', 1, 'k', 'a']),
                              ('fcall_8k10a', ['FCALL', 'ret1', 8] + ['k%d' % i for i in range(8)] +
                               ['a%d' % i for i in range(10)]),
                              ('set_px', ['SET', 'x', 'P1|1795331927095183|1795331957095||' + OWNER_A +
                                          '|1|1042||||' + LABEL + '\n' + OWNER_A + ' 1041', 'PX', LEASE]),
                              ('get', ['GET', 'x'])]:
                r.call('SLOWLOG', 'RESET')
                r.pipeline([cmd] * args.iters)
                log = r.call('SLOWLOG', 'GET', '-1')
                us = [e[2] for e in log if e[3][0].decode().upper() == cmd[0] and e[4] != b'?:0']
                round_out['entry'][what] = statistics.median(us)
            round_out['codec'] = run_codecs(r, codec_sha, records, args.iters)
            results['rounds'].append(round_out)
            print('round %d done, load %s' % (rnd + 1, os.getloadavg()), file=sys.stderr)
        # the record a packed name holds after two owners used it, for the report
        results['sample_record'] = r.call('GET', 'dlock:{packed-t}').decode()
        results['sample_record_held'] = None
        results['load'].append(os.getloadavg())
        json.dump(results, open(args.out, 'w'), indent=1)
        print('wrote %s' % args.out, file=sys.stderr)


if __name__ == '__main__':
    main()
