// One byte stream to a Redis server: TCP, TLS over TCP, or a unix socket.
// Connecting includes name resolution and the TLS handshake. All methods run
// on the I/O thread; handlers keep the stream alive until they have run.
// Every socket is opened close-on-exec, so no exec'd program inherits it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "asio.hpp"
#include "dlock/server_address.hpp"

namespace dlock::detail {

// Asio/OpenSSL/system error -> dlock::errc, for connect-time failures.
std::error_code map_connect_error(const std::error_code& ec);

class Stream : public std::enable_shared_from_this<Stream> {
public:
    using ConnectHandler = std::function<void(std::error_code ec, std::string detail)>;
    using IoHandler = std::function<void(std::error_code ec, std::size_t bytes)>;

    Stream(asio::io_context& io, const ServerAddress& address, asio::ssl::context* tls);

    void async_connect(ConnectHandler done);
    // done(ec, bytes) is handed to asio as it is (no std::function): asio
    // keeps the operation in memory it recycles, so a read per reply costs
    // no allocation once the loop runs.
    template <typename Handler>
    void async_read_some(asio::mutable_buffer buffer, Handler&& done) {
        auto handler = [self = shared_from_this(), done = std::forward<Handler>(done)](std::error_code ec,
                                                                                      std::size_t n) mutable {
            done(ec, n);
        };
        if (tls_) tls_->async_read_some(buffer, std::move(handler));
        else if (tcp_) tcp_->async_read_some(buffer, std::move(handler));
        else unix_->async_read_some(buffer, std::move(handler));
    }
    void async_write(std::shared_ptr<const std::string> bytes, IoHandler done);

    // The descriptor other threads may send() on directly, or -1 where every
    // write must go through the I/O thread (TLS).
    int direct_write_handle();
    // Takes the plain socket's descriptor out of the I/O thread's reactor
    // (asio registers it edge-triggered for its whole life, so the I/O
    // thread would wake on every reply even with no read outstanding): the
    // descriptor is then the caller's, until give_back() returns it. -1 and
    // nothing done over TLS. No asynchronous operation may be outstanding.
    int take_out();
    // Puts a descriptor take_out() returned back under the reactor.
    std::error_code give_back(int fd);
    void close() noexcept;
    // True from the TCP connection's success until the TLS handshake ends:
    // a connect timeout then most likely means the server does not speak TLS
    // (a plain Redis waits for the end of a line that never comes).
    bool in_tls_handshake() const noexcept { return in_tls_handshake_; }

private:
    using Resolved = asio::ip::tcp::resolver::results_type;

    void connect_tcp(asio::ip::tcp::socket& socket, std::function<void(std::error_code)> done);
    void connect_from(asio::ip::tcp::socket& socket, Resolved results, Resolved::iterator next,
                      std::function<void(std::error_code)> done, std::error_code last);
    void start_tls(ConnectHandler done);

    asio::io_context& io_;
    ServerAddress address_;
    asio::ssl::context* tls_context_;
    asio::ip::tcp::resolver resolver_;
    std::unique_ptr<asio::ip::tcp::socket> tcp_;
    std::unique_ptr<asio::local::stream_protocol::socket> unix_;
    std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket>> tls_;
    bool closed_ = false;
    bool v6_ = false;  // the TCP socket's protocol, for give_back()
    bool in_tls_handshake_ = false;  // I/O thread only
};

}  // namespace dlock::detail
