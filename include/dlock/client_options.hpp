// dlock/client_options.hpp — how a Client connects, times out and reconnects.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace dlock {

class Metrics;

struct TlsOptions {
    std::string ca_file;        // default: empty = the system's trusted CAs
    std::string cert_file;      // default: empty = no client certificate
    std::string key_file;       // default: empty; required with cert_file
    bool verify_peer = true;    // default: true; check the server certificate and host name
};

struct ClientOptions {
    // How long one connect attempt (TCP/TLS + AUTH/SELECT) may take. Default 2 s.
    std::chrono::milliseconds connect_timeout{2000};
    // How long a command may wait for its reply, counted from submission.
    // On expiry the caller gets errc::command_timeout and, since replies are
    // matched in order, the connection is reset. Default 5 s.
    std::chrono::milliseconds command_timeout{5000};
    // Reconnect backoff after a failed attempt: doubles from min to max, each
    // delay randomised to 50..100 %. Defaults 20 ms and 250 ms: a held lock's
    // renewals wait for the connection, so it comes back within a quarter of
    // a second of the server (a restart that keeps the data costs no hold
    // whose lease outlasts the outage by that much), at the price of four
    // refused connects a second while a server is down.
    std::chrono::milliseconds reconnect_backoff_min{20};
    std::chrono::milliseconds reconnect_backoff_max{250};
    // Sent with CLIENT SETNAME so operators can see who is connected.
    // Default "dlock"; empty = none.
    std::string client_name = "dlock";
    // TLS settings for rediss:// URIs.
    TlsOptions tls;
    // Sentinel deployments (redis-sentinel:// URIs): the user and password
    // the sentinels themselves require; the URI's credentials are the
    // master's. Default empty: the sentinels need none.
    std::string sentinel_username;
    std::string sentinel_password;
    // How often the sentinels are asked for the master, besides listening
    // for +switch-master: the fallback when that subscription is lost.
    // Default 1 s.
    std::chrono::milliseconds sentinel_poll_interval{1000};
    // Redis Cluster (redis-cluster:// URIs): how often the slot map is
    // asked for when nothing prompted it (a MOVED answer or an unreachable
    // node asks at once). Default 2 s.
    std::chrono::milliseconds cluster_refresh_interval{2000};
    // Limits on what the server may send: the length of one string and the
    // element count of one array. Both are checked against the reply's
    // headers, before the bytes they announce are buffered; over a limit the
    // reply fails with errc::reply_too_large and the connection is reset.
    // Nesting is limited to 7 levels. Defaults 512 MiB and 16 Mi elements.
    //
    // What they bound: memory is only ever allocated for bytes received (an
    // announced array count reserves nothing), and each reply is charged
    // what building it takes (every element is a whole Reply, 72 bytes,
    // for as little as 3 bytes on the wire; array storage; strings) before
    // it is allocated: a reply that would cost more than 8 times the bytes
    // it took on the wire plus max_reply_overhead fails with
    // errc::reply_too_large naming the command and the server (the
    // connection is reset). So a hostile or broken server can make one
    // connection hold at most about max_string_bytes of buffered string, or
    // 8 times what it sent plus max_reply_overhead (an array's storage is
    // charged twice while it moves to a larger block, as both are held
    // then). An array of bulk strings of 13 bytes or more (20 on the wire)
    // always fits; an array of nils, small integers or empty strings fits
    // up to about 130 000 elements with the default overhead (raise it for
    // an MGET of more keys). A 2 Mi-element array of nils (10 MB) used to
    // cost 226 MB at its peak; it is refused at 22.5 MB.
    // The replies to the lock scripts a hold runs are a few numbers:
    // they are held to 16 elements and 64 KiB each whatever these limits
    // say, and one that announces more fails its call with reply_too_large
    // naming the script (the connection is reset).
    // SIZE_MAX means no limit of dlock's own (for max_reply_overhead: no
    // charge at all); lengths hiredis cannot add to
    // without overflow (past 2^63 - 3) and counts past INT_MAX are refused
    // whatever the limits. Running out of memory while reading a reply
    // fails it with std::errc::not_enough_memory and resets the connection.
    // max_reply_overhead must be at least 64 KiB; default 16 MiB.
    std::size_t max_string_bytes = std::size_t{512} << 20;
    std::size_t max_array_elements = std::size_t{16} << 20;
    std::size_t max_reply_overhead = std::size_t{16} << 20;
    // Told once per Client about each server setting that weakens locks:
    // - a maxmemory-policy other than noeviction, under which Redis may evict
    //   lock keys (a held lock vanishes; a fence counter restarts). Checked
    //   with CONFIG GET when the first lock is made through this Client, if
    //   the server lets us read it;
    // - the server refusing a SUBSCRIBE (NOPERM: an ACL user without rights
    //   on dlock's channels), with the channel and the server's error: a
    //   force-release is then heard only at the hold's next renewal, and a
    //   waiter notices a release only when it tries again
    //   (Subscription::refused). Told at the first refusal.
    // Runs on the I/O thread; must not block.
    // Default none (the dlock command prints it to stderr).
    std::function<void(std::string_view message)> on_warning;
    // Where this client's locks record what they do (metrics.hpp). Default
    // null: the Client makes its own (Client::metrics()). Pass one to share
    // it among clients; Masters shares one among its masters' clients.
    std::shared_ptr<Metrics> metrics;
};

}  // namespace dlock
