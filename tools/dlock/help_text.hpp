// The footers of `dlock --help` and `dlock COMMAND --help`: exit codes and
// examples, the same words as the man page (dlock.1).
#pragma once

namespace dlock::cli::help {

inline constexpr const char* global = R"(Global options may come before or after the command. Durations: 250ms, 1.5s,
30s, 2m, 1m30s, 2h45m, 1d; a bare number means seconds. Password: --password-file,
$DLOCK_PASSWORD or $REDISCLI_AUTH (kept out of `ps`), or in the URL; the ACL
user from --user or $DLOCK_USER.

A lock name that begins with '-' goes in --key=NAME (every command that takes a
KEY), or after -- (all but run); scripts should say --key="$KEY". -h, --help and
--version after a command are taken only alone.

Sentinel and Cluster: --url redis-sentinel://s1:26379,s2:26379,s3:26379#mymaster
(the master the sentinels name; --sentinel-password-file for the sentinels' own
password) or --url redis-cluster://n1:6379,n2:6379 (seed nodes); status shows
which node and slot hold the lock.

Several masters: --url given 3, 5, ... times (or one comma list) makes run, hold,
status and release work on a Redlock over those independent Redis masters.

Exit status: 0 success; 1 free/not held (status --exit-status, release, wait-free);
64 usage error (also an empty --url); 65 the name is held as another kind, or its
semaphore has another limit; 69 Redis unreachable or refusing (auth, TLS,
a server error); 75 not acquired in time; 79 the lease was lost; run and hold:
128 + N when signal N ended the wait for the lock; for run, otherwise the
command's own status (128 + N if it died of signal N).

Each command has its own --help with examples. See dlock(1).

Example: a nightly job that must run on one host only (crontab on every host):
  0 3 * * *  dlock --url redis://locks.internal:6379 run --no-wait nightly-report -- /usr/local/bin/report)";

inline constexpr const char* run = R"(The command runs with DLOCK_KEY and DLOCK_FENCING_TOKEN in its environment. The
lease is renewed while it runs. --shared takes KEY's read side: any number of
--shared runs go together, a run without it goes alone (and once one waits, new
--shared runs queue behind it); the token is then the last write's. If the lease
is lost it gets SIGTERM (--on-lost).
If dlock is killed with SIGKILL, the command gets SIGKILL too (unless --on-lost
ignore): nobody would renew the lease, and it must not run on after it expires.
--fair takes a fair lock instead: waiters on every host get it strictly in the
order they first found it taken (one key, one server; it excludes runs without
--shared but does not wait for --shared ones: while readers hold the key it
exits 65). With --permits N it holds one of N permits of semaphore KEY instead
(at most N commands at once, first come first served; DLOCK_FENCING_TOKEN is 0);
a semaphore with another limit exits 65 unless --set-limit sets it to N.
One name is one resource: a lock run on a semaphore's name, or a --permits run
on a lock's, exits 65 naming what the name is.

Several keys (KEY KEY ..., or --key repeated) are held as one: all or none, taken
in one fixed order whatever order they are given in, so runs that list them
differently never deadlock. The command then gets DLOCK_KEY_COUNT=N and, for
i = 1..N in the order given, DLOCK_KEY_i and DLOCK_FENCING_TOKEN_i (also set for
one key); with several keys DLOCK_KEY and DLOCK_FENCING_TOKEN are left unset.
Losing any key's lease counts as losing the lock. Several keys need one server
(not a Redlock), and are taken as plain locks: they exclude other runs without
--shared, and exit 65 while --shared runs hold one of the keys.

Exit status: the command's own (128 + N if it died of signal N); 75 (or
--conflict-exit-code) when not acquired in time; 79 when the lease was lost while
the command ran; 128 + N when signal N ended the wait for the lock (the command
never ran); 64 usage error; 65 the key is held as another kind, or its semaphore
has another limit; 69 Redis unreachable or refusing.

Examples:
  dlock run --no-wait nightly-report -- /usr/local/bin/report --full
  dlock run --wait 5m -c 'pg_dump app | gzip > /backup/app.gz' backup
  dlock --url redis://a:6379,redis://b:6379,redis://c:6379 run --ttl 1m deploy -- ./deploy.sh
  dlock run --json-events job -c './job 2>>/var/log/job.log' 2>>/var/log/job.events
  dlock run --wait 1m accounts:7 accounts:3 -- ./transfer 7 3
  dlock run --permits 4 encoder -- ./encode.sh
  dlock run --fair --wait 10m deploy-queue -- ./deploy.sh   # strictly in turn
  dlock run --shared catalog -- ./export-catalog    # beside other --shared runs;
  dlock run catalog -- ./rebuild-catalog            # alone, after them

With --json-events every line dlock writes on stderr is one JSON object: its
errors and warnings too ("error", "warning" events). The command's own stderr is
the same stream unless redirected, as above.)";

inline constexpr const char* hold = R"(Prints the fencing token (with --json: key, token, lease and holder) on stdout,
then keeps the lease renewed until stdin ends or SIGTERM, SIGINT or SIGHUP
arrives, and releases. For scripts that cannot wrap one command in `dlock run`.
Only the end of a pipe, socket or terminal counts: stdin from /dev/null (what a
shell gives `dlock hold KEY &`) or a file is ignored, and only a signal releases.

Exit status: 0 released (also on SIGTERM, SIGINT or SIGHUP once held); 75 (or
--conflict-exit-code) not acquired in time; 79 the lease was lost meanwhile;
128 + N when signal N ended the wait for the lock; 64 usage error; 69 Redis
unreachable or refusing.

Example (bash):
  coproc LOCK { dlock hold --wait 1m migrations; }
  read -r token <&"${LOCK[0]}" || exit 75   # no token: not acquired
  ./migrate --fencing-token "$token"
  exec {LOCK[1]}>&-; wait "$LOCK_PID"        # closing stdin releases)";

inline constexpr const char* status = R"(Exit status: 0 (with --exit-status: 0 held, 1 free); 64 usage error; 69 Redis
unreachable or refusing.

Examples:
  dlock status nightly-report
  dlock status --json nightly-report | jq .fencing_token
  dlock status --exit-status nightly-report && echo busy   # probes)";

inline constexpr const char* release = R"(Breaks every kind of hold: a lock, readers (--shared), permits (--permits).
Each holder's dlock hears at once and stops its command (exit 79). A name held
several times needs --all, or --holder OWNER for one of them.

Exit status: 0 released; 1 it was not held; 64 usage error (also without --force,
and several holds without --all or --holder); 69 Redis unreachable or refusing.

Examples:
  dlock release --force nightly-report
  dlock release --force --all encoder          # every permit of a semaphore)";

inline constexpr const char* wait_free = R"(Does not take the lock; someone else may take it at once.

Exit status: 0 free; 1 still held at --timeout; 64 usage error; 69 Redis
unreachable or refusing.

Example:
  dlock wait-free --timeout 10m nightly-report && ./send-report)";

inline constexpr const char* list = R"(PATTERN is a Redis glob on lock names (default *). Walks the keyspace with SCAN,
never KEYS, so it does not block the server; the list is not one atomic snapshot.

Exit status: 0; 64 usage error; 69 Redis unreachable or refusing.

Examples:
  dlock list
  dlock list 'backup-*' --json)";

inline constexpr const char* demo = R"(Starts its own redis-server unless given --url.

Exit status: 0 when the locked run awarded exactly the bonuses; 70 otherwise.

Example:
  dlock demo --processes 4 --threads 25)";

}  // namespace dlock::cli::help
