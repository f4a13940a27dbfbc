#include "stream.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "dlock/error.hpp"

namespace dlock::detail {

std::error_code map_connect_error(const std::error_code& ec) {
    if (!ec) return ec;
    if (ec.category() == error_category()) return ec;
    if (ec.category() == asio::error::get_ssl_category() || ec == asio::ssl::error::stream_truncated)
        return errc::tls_error;
    if (ec.category() == asio::error::get_netdb_category() || ec.category() == asio::error::get_addrinfo_category())
        return errc::resolve_failed;
    // Standalone Asio reports errno values in a category of its own that does
    // not compare equal to std::errc, so look at the value.
    if (ec.category() == asio::error::get_system_category() || ec.category() == std::system_category()) {
        switch (ec.value()) {
            case ECONNREFUSED:
            case ENOENT:
            case EACCES:
            case ECONNRESET:
            case EPIPE:  // closed on us before we logged in (a TLS 1.3 server rejecting our certificate)
            case ENETUNREACH:
            case EHOSTUNREACH: return errc::connection_refused;
            case ETIMEDOUT: return errc::connect_timeout;
            default: break;
        }
    }
    // The server closed the connection before the handshake finished: it
    // refused us (a TLS port spoken to in plain text, maxclients, ...).
    if (ec == asio::error::eof) return errc::connection_refused;
    return errc::connection_lost;
}

namespace {

// Asio opens sockets with a plain socket() call, without SOCK_CLOEXEC: a
// command that `dlock run` execs would inherit the connection and hold it
// open. Every socket is opened here instead, close-on-exec from its first
// instant; setting the flag after the open would leave a window in which
// another thread's fork() and exec() take the descriptor along.
template <typename Socket, typename Protocol>
std::error_code open_close_on_exec(Socket& socket, const Protocol& protocol) {
    std::error_code ec;
    if (socket.is_open()) socket.close(ec);
    const int fd = ::socket(protocol.family(), protocol.type() | SOCK_CLOEXEC, protocol.protocol());
    if (fd < 0) return {errno, std::system_category()};
    socket.assign(protocol, fd, ec);
    if (ec) ::close(fd);
    return ec;
}

}  // namespace

Stream::Stream(asio::io_context& io, const ServerAddress& address, asio::ssl::context* tls)
    : io_(io), address_(address), tls_context_(tls), resolver_(io) {}

void Stream::async_connect(ConnectHandler done) {
    auto self = shared_from_this();
    switch (address_.transport) {
        case ServerAddress::Transport::unix_socket: {
            unix_ = std::make_unique<asio::local::stream_protocol::socket>(io_);
            auto report = [self, done](std::error_code ec) {
                done(map_connect_error(ec), ec ? ec.message() : std::string{});
            };
            if (auto ec = open_close_on_exec(*unix_, asio::local::stream_protocol()))
                return asio::post(io_, [report, ec] { report(ec); });
            unix_->async_connect(asio::local::stream_protocol::endpoint(address_.socket_path), report);
            return;
        }
        case ServerAddress::Transport::tcp:
            tcp_ = std::make_unique<asio::ip::tcp::socket>(io_);
            connect_tcp(*tcp_, [self, done](std::error_code ec) {
                done(map_connect_error(ec), ec ? ec.message() : std::string{});
            });
            return;
        case ServerAddress::Transport::tls:
            tls_ = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket>>(io_, *tls_context_);
            connect_tcp(tls_->next_layer(), [self, done](std::error_code ec) {
                if (ec) return done(map_connect_error(ec), ec.message());
                self->start_tls(done);
            });
            return;
    }
}

void Stream::connect_tcp(asio::ip::tcp::socket& socket, std::function<void(std::error_code)> done) {
    auto self = shared_from_this();
    resolver_.async_resolve(address_.host, std::to_string(address_.port),
                            [self, &socket, done](std::error_code ec, Resolved results) {
                                if (ec) return done(ec);
                                self->connect_from(socket, results, results.begin(), done, ec);
                            });
}

// Tries each resolved address in turn, as asio::async_connect would, on a
// socket opened here (asio's would reopen it without close-on-exec).
void Stream::connect_from(asio::ip::tcp::socket& socket, Resolved results, Resolved::iterator next,
                          std::function<void(std::error_code)> done, std::error_code last) {
    if (closed_) return done(asio::error::operation_aborted);
    if (next == results.end()) return done(last ? last : make_error_code(asio::error::host_not_found));
    const auto endpoint = next->endpoint();
    if (auto ec = open_close_on_exec(socket, endpoint.protocol()))
        return connect_from(socket, results, std::next(next), done, ec);
    socket.async_connect(endpoint, [self = shared_from_this(), &socket, results, next, done](std::error_code ec) {
        if (ec) return self->connect_from(socket, results, std::next(next), done, ec);
        std::error_code ignored;
        socket.set_option(asio::ip::tcp::no_delay(true), ignored);
        done(ec);
    });
}

void Stream::start_tls(ConnectHandler done) {
    SSL* ssl = tls_->native_handle();
    std::error_code not_an_ip;
    (void)asio::ip::make_address(address_.host, not_an_ip);
    if (not_an_ip) {
        // A name: send SNI and check the certificate against it.
        SSL_set_tlsext_host_name(ssl, address_.host.c_str());
        SSL_set1_host(ssl, address_.host.c_str());
    } else {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), address_.host.c_str());
    }
    auto self = shared_from_this();
    in_tls_handshake_ = true;
    tls_->async_handshake(asio::ssl::stream_base::client, [self, done](std::error_code ec) {
        self->in_tls_handshake_ = false;
        if (!ec) return done({}, {});
        std::string detail = ec.message();
        long verify = SSL_get_verify_result(self->tls_->native_handle());
        if (verify != X509_V_OK) detail += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
        done(errc::tls_error, detail);
    });
}

void Stream::async_write(std::shared_ptr<const std::string> bytes, IoHandler done) {
    auto self = shared_from_this();
    auto buffer = asio::buffer(*bytes);
    auto handler = [self, bytes, done = std::move(done)](std::error_code ec, std::size_t n) { done(ec, n); };
    if (tls_) asio::async_write(*tls_, buffer, std::move(handler));
    else if (tcp_) asio::async_write(*tcp_, buffer, std::move(handler));
    else asio::async_write(*unix_, buffer, std::move(handler));
}

int Stream::direct_write_handle() {
    if (tcp_ && tcp_->is_open()) return tcp_->native_handle();
    if (unix_ && unix_->is_open()) return unix_->native_handle();
    return -1;
}

int Stream::take_out() {
    std::error_code ec;
    if (tcp_ && tcp_->is_open()) {
        v6_ = tcp_->local_endpoint(ec).protocol() == asio::ip::tcp::v6();
        const int fd = tcp_->release(ec);
        return ec ? -1 : fd;
    }
    if (unix_ && unix_->is_open()) {
        const int fd = unix_->release(ec);
        return ec ? -1 : fd;
    }
    return -1;
}

std::error_code Stream::give_back(int fd) {
    std::error_code ec;
    if (tcp_) tcp_->assign(v6_ ? asio::ip::tcp::v6() : asio::ip::tcp::v4(), fd, ec);
    else if (unix_) unix_->assign(asio::local::stream_protocol(), fd, ec);
    else ec = make_error_code(std::errc::bad_file_descriptor);
    return ec;
}

void Stream::close() noexcept {
    closed_ = true;
    std::error_code ignored;
    resolver_.cancel();
    if (tcp_) tcp_->close(ignored);
    if (unix_) unix_->close(ignored);
    if (tls_) tls_->lowest_layer().close(ignored);
}

}  // namespace dlock::detail
