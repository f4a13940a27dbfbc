// A TCP proxy on loopback that can misbehave on purpose, for fault tests:
// it forwards every connection it accepts to one target (a redis-server
// started by RedisServer) and, on command, goes silent, delays replies,
// holds requests back or drops connections.
//
// Contract:
// - It listens on 127.0.0.1 on a free port from construction until
//   destruction, and serves from a thread of its own (poll(2), no busy
//   waiting). Each accepted connection gets its own connection to the target;
//   if the target cannot be reached within a second, the client's connection
//   is closed (EOF).
// - Every control may be called from any thread. When it returns, the
//   proxy's thread has applied it to every current connection and applies it
//   to every new one: no byte is forwarded against it afterwards. Bytes the
//   proxy had already written to a socket may still be in flight.
// - Bytes that a control holds back are kept in order, at most
//   max_held_bytes per direction of a connection; past that the proxy stops
//   reading from that side (the sender's TCP window fills), so nothing is
//   ever lost while a connection stays open.
// - A side that closes is passed on as a half-close once what is held for
//   the other side has been delivered; a connection counts in connections()
//   until both sides are closed, or a read or write fails (then both close).
// - The destructor stops the thread and closes every socket.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace dlock::support {

class TcpProxy {
public:
    // Held bytes per direction of one connection before the proxy stops reading.
    static constexpr std::size_t max_held_bytes = 4 << 20;

    // Forwards to target_host (a numeric IPv4 address) : target_port.
    // Throws std::runtime_error if it cannot listen.
    explicit TcpProxy(std::uint16_t target_port, std::string target_host = "127.0.0.1");
    ~TcpProxy();
    TcpProxy(const TcpProxy&) = delete;
    TcpProxy& operator=(const TcpProxy&) = delete;

    std::uint16_t port() const { return port_; }
    std::string uri() const;  // redis://127.0.0.1:<port>
    // Connections currently open (accepted and connected to the target).
    std::size_t connections() const;

    // On: nothing is forwarded in either direction, on current and new
    // connections; bytes are still read and held, so the client sees silence,
    // not a reset. New connections are accepted (and connected to the target)
    // but carry nothing. Off: everything held is forwarded in order (a healed
    // network); to throw held bytes away, drop_connections() instead.
    void black_hole(bool on);
    // Every server->client chunk is delivered `delay` after it arrived, in
    // order. A change applies at once to chunks still waiting: 0 (or less)
    // releases them all. Requests are not delayed.
    void delay_replies(std::chrono::milliseconds delay);
    // On: client->server bytes are held back; replies still flow. Off: what
    // was held is forwarded in order.
    void hold_requests(bool on);
    // Closes both sides of every current connection now, held bytes
    // included: clients see EOF (a reset if they had unread bytes in
    // flight). New connections are served as usual.
    void drop_connections();
    // On: each new connection is closed as soon as it is accepted (the client
    // sees EOF); current connections are left alone.
    void refuse_new(bool on);

private:
    struct Settings {
        bool black_hole = false;
        bool hold_requests = false;
        bool refuse_new = false;
        bool stop = false;
        std::chrono::milliseconds reply_delay{0};
        std::uint64_t drops = 0;  // drop_connections() calls so far
    };
    class Loop;

    template <typename Edit>
    void change(Edit edit);
    void serve();

    std::uint16_t port_ = 0;
    int listen_fd_ = -1;
    int wake_fd_ = -1;  // an eventfd: a control changed, poll must return
    std::uint32_t target_address_ = 0;  // network byte order
    std::uint16_t target_port_ = 0;

    mutable std::mutex mutex_;
    std::condition_variable applied_cv_;
    Settings settings_;             // guarded by mutex_
    std::uint64_t requested_ = 0;   // guarded by mutex_: changes made
    std::uint64_t applied_ = 0;     // guarded by mutex_: changes the thread has taken up
    bool serving_ = true;           // guarded by mutex_: false once the thread has ended
    std::size_t connections_ = 0;   // guarded by mutex_
    std::thread thread_;
};

}  // namespace dlock::support
