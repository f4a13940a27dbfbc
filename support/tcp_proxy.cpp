#include "tcp_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace dlock::support {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t read_size = 64 * 1024;
// A burst of connections is accepted over several turns, so reads and
// writes of open ones are not starved.
constexpr int max_accepts_per_turn = 16;
// On loopback a connect is refused or accepted at once; only a target whose
// backlog is full makes it wait.
constexpr std::chrono::seconds connect_limit{1};
// A control waits this long at most for the proxy's thread to apply it.
constexpr std::chrono::seconds control_limit{10};

std::runtime_error system_failure(const char* what) {
    return std::runtime_error(std::string("tcp proxy: ") + what + ": " + std::system_category().message(errno));
}

void set_no_delay(int fd) {
    // Replies are small; Nagle's algorithm would add its own delay to the measured ones.
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct Chunk {
    std::string bytes;
    Clock::time_point arrived;
};

// One direction of a connection: bytes read from one socket that the other
// has not been sent yet.
struct Pipe {
    std::deque<Chunk> chunks;
    std::size_t held = 0;        // unsent bytes in chunks
    std::size_t front_sent = 0;  // bytes of chunks.front() already sent
    bool eof = false;            // the source has closed its side
    bool shut = false;           // the close has been passed on
    bool want_write = false;     // the destination took less than was ready

    bool wants_read() const { return !eof && held < TcpProxy::max_held_bytes; }
};

// What a control allows for one direction, right now.
struct Gate {
    bool closed = false;
    std::chrono::milliseconds delay{0};
};

struct Link {
    int client;
    int server;
    Pipe up;    // client -> server
    Pipe down;  // server -> client
    bool failed = false;

    Link(int c, int s) : client(c), server(s) {}
    ~Link() {
        close(client);
        close(server);
    }
    Link(const Link&) = delete;
    Link& operator=(const Link&) = delete;

    bool finished() const { return failed || (up.shut && down.shut); }
};

// Reads what one recv gives; false when the connection failed.
bool receive(int from, Pipe& pipe, std::vector<char>& buffer, Clock::time_point now) {
    ssize_t n = recv(from, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n > 0) {
        pipe.chunks.push_back({std::string(buffer.data(), static_cast<std::size_t>(n)), now});
        pipe.held += static_cast<std::size_t>(n);
        return true;
    }
    if (n == 0) {
        pipe.eof = true;
        return true;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

// Sends what the gate lets through, oldest first, until the destination is
// full; passes a close on once nothing is left. False when the connection failed.
bool send_ready(Pipe& pipe, int to, const Gate& gate, Clock::time_point now) {
    pipe.want_write = false;
    if (gate.closed) return true;
    while (!pipe.chunks.empty() && pipe.chunks.front().arrived + gate.delay <= now) {
        const auto& chunk = pipe.chunks.front();
        ssize_t n = send(to, chunk.bytes.data() + pipe.front_sent, chunk.bytes.size() - pipe.front_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) {
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
            pipe.want_write = true;  // poll says when there is room again
            return true;
        }
        pipe.front_sent += static_cast<std::size_t>(n);
        pipe.held -= static_cast<std::size_t>(n);
        if (pipe.front_sent == chunk.bytes.size()) {
            pipe.chunks.pop_front();
            pipe.front_sent = 0;
        }
    }
    if (pipe.eof && pipe.chunks.empty() && !pipe.shut) {
        shutdown(to, SHUT_WR);
        pipe.shut = true;
    }
    return true;
}

// When the oldest chunk that only waits for its delay becomes due.
std::optional<Clock::time_point> due(const Pipe& pipe, const Gate& gate) {
    if (gate.closed || pipe.chunks.empty() || pipe.want_write) return std::nullopt;
    return pipe.chunks.front().arrived + gate.delay;
}

short interest(const Pipe& reading, const Pipe& writing) {
    return static_cast<short>((reading.wants_read() ? POLLIN : 0) | (writing.want_write ? POLLOUT : 0));
}

}  // namespace

// The proxy's thread: each turn takes up the controls, sends what they let
// through, publishes what it applied, then polls for readiness, for the next
// delayed chunk, or for a control to change.
class TcpProxy::Loop {
public:
    explicit Loop(TcpProxy& proxy) : proxy_(proxy), buffer_(read_size) {}

    void run() {
        while (take_settings()) {
            forward_all(Clock::now());
            publish();
            wait_and_read();
        }
    }

private:
    Gate up_gate() const { return {settings_.black_hole || settings_.hold_requests, {}}; }
    Gate down_gate() const { return {settings_.black_hole, settings_.reply_delay}; }

    // False when the proxy is being destroyed.
    bool take_settings() {
        {
            std::lock_guard lock(proxy_.mutex_);
            settings_ = proxy_.settings_;
            generation_ = proxy_.requested_;
        }
        if (settings_.stop) return false;
        if (settings_.drops != drops_done_) {
            links_.clear();
            drops_done_ = settings_.drops;
        }
        return true;
    }

    void forward_all(Clock::time_point now) {
        for (auto& link : links_) {
            if (link->failed) continue;
            link->failed = !send_ready(link->up, link->server, up_gate(), now) ||
                           !send_ready(link->down, link->client, down_gate(), now);
        }
        std::erase_if(links_, [](const auto& link) { return link->finished(); });
    }

    void publish() {
        {
            std::lock_guard lock(proxy_.mutex_);
            proxy_.applied_ = generation_;
            proxy_.connections_ = links_.size();
        }
        proxy_.applied_cv_.notify_all();
    }

    int poll_timeout() const {
        std::optional<Clock::time_point> next;
        for (const auto& link : links_) {
            for (auto at : {due(link->up, up_gate()), due(link->down, down_gate())})
                if (at && (!next || *at < *next)) next = at;
        }
        if (!next) return -1;  // only a socket or a control can change anything
        auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
        return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
    }

    void wait_and_read() {
        std::vector<pollfd> fds{{proxy_.listen_fd_, POLLIN, 0}, {proxy_.wake_fd_, POLLIN, 0}};
        for (const auto& link : links_) {
            // A socket with nothing to wait for stays out of the set (fd -1):
            // a hang-up on it would otherwise wake poll at once, again and again.
            short client_events = interest(link->up, link->down), server_events = interest(link->down, link->up);
            fds.push_back({client_events ? link->client : -1, client_events, 0});
            fds.push_back({server_events ? link->server : -1, server_events, 0});
        }
        if (poll(fds.data(), fds.size(), poll_timeout()) < 0) {
            if (errno == EINTR) return;
            throw system_failure("poll");
        }
        const auto now = Clock::now();
        const auto open = links_.size();  // accept_new() appends after these
        for (std::size_t i = 0; i < open; ++i) {
            auto& link = *links_[i];
            if (readable(fds[2 + 2 * i]) && !receive(link.client, link.up, buffer_, now)) link.failed = true;
            if (readable(fds[3 + 2 * i]) && !receive(link.server, link.down, buffer_, now)) link.failed = true;
        }
        if (fds[1].revents & POLLIN) {
            std::uint64_t count;
            (void)!read(proxy_.wake_fd_, &count, sizeof count);
        }
        if (fds[0].revents & POLLIN) accept_new();
    }

    static bool readable(const pollfd& fd) {
        return (fd.events & POLLIN) && (fd.revents & (POLLIN | POLLHUP | POLLERR));
    }

    void accept_new() {
        for (int i = 0; i < max_accepts_per_turn; ++i) {
            int client = accept4(proxy_.listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (client < 0) return;  // none left, or one that went away before it was accepted
            int server = settings_.refuse_new ? -1 : connect_to_target();
            if (server < 0) {
                close(client);
                continue;
            }
            set_no_delay(client);
            links_.push_back(std::make_unique<Link>(client, server));
        }
    }

    // A blocking connect bounded by SO_SNDTIMEO, then non-blocking; -1 on failure.
    int connect_to_target() const {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        timeval limit{connect_limit.count(), 0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = proxy_.target_address_;
        addr.sin_port = htons(proxy_.target_port_);
        if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
            close(fd);
            return -1;
        }
        set_no_delay(fd);
        return fd;
    }

    TcpProxy& proxy_;
    std::vector<char> buffer_;
    Settings settings_;
    std::uint64_t generation_ = 0;
    std::uint64_t drops_done_ = 0;
    std::vector<std::unique_ptr<Link>> links_;
};

TcpProxy::TcpProxy(std::uint16_t target_port, std::string target_host) : target_port_(target_port) {
    in_addr target{};
    if (inet_pton(AF_INET, target_host.c_str(), &target) != 1)
        throw std::runtime_error("tcp proxy: not a numeric IPv4 address: " + target_host);
    target_address_ = target.s_addr;

    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof addr;
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listen_fd_, 128) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
        auto error = system_failure("listen");
        if (listen_fd_ >= 0) close(listen_fd_);
        throw error;
    }
    port_ = ntohs(addr.sin_port);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
        auto error = system_failure("eventfd");
        close(listen_fd_);
        throw error;
    }
    thread_ = std::thread([this] { serve(); });
}

TcpProxy::~TcpProxy() {
    change([](Settings& s) { s.stop = true; });
    thread_.join();
    close(wake_fd_);
    close(listen_fd_);
}

std::string TcpProxy::uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }

std::size_t TcpProxy::connections() const {
    std::lock_guard lock(mutex_);
    return connections_;
}

void TcpProxy::black_hole(bool on) {
    change([on](Settings& s) { s.black_hole = on; });
}

void TcpProxy::delay_replies(std::chrono::milliseconds delay) {
    change([delay](Settings& s) { s.reply_delay = std::max(delay, std::chrono::milliseconds(0)); });
}

void TcpProxy::hold_requests(bool on) {
    change([on](Settings& s) { s.hold_requests = on; });
}

void TcpProxy::drop_connections() {
    change([](Settings& s) { ++s.drops; });
}

void TcpProxy::refuse_new(bool on) {
    change([on](Settings& s) { s.refuse_new = on; });
}

template <typename Edit>
void TcpProxy::change(Edit edit) {
    std::unique_lock lock(mutex_);
    edit(settings_);
    const auto generation = ++requested_;
    std::uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    applied_cv_.wait_for(lock, control_limit, [&] { return applied_ >= generation || !serving_; });
}

void TcpProxy::serve() {
    try {
        Loop(*this).run();
    } catch (const std::exception& e) {
        // Only poll itself can fail here; the tests then see a proxy that forwards nothing.
        std::fprintf(stderr, "%s\n", e.what());
    }
    {
        std::lock_guard lock(mutex_);
        serving_ = false;
        connections_ = 0;
    }
    applied_cv_.notify_all();
}

}  // namespace dlock::support
