// A loopback TCP server that speaks just enough RESP to play a node whose
// answers a test chooses: each command (an array of bulk strings) goes to
// the test's handler, which returns the raw RESP bytes to send back (empty:
// nothing). For unit-level tests of what the client does with answers no
// real server gives on demand (a sentinel naming a dead master, a cluster
// naming new nodes on every refresh). Integration tests use real servers.
//
// One thread accepts and serves every connection in turn with poll(); stops
// and closes everything in the destructor.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dlock::support {

class ScriptedServer {
public:
    using Handler = std::function<std::string(const std::vector<std::string>& command)>;

    explicit ScriptedServer(Handler handler) : handler_(std::move(handler)) {
        listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
        if (listener_ < 0) throw std::runtime_error("socket");
        int yes = 1;
        ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(listener_, 64) != 0) {
            ::close(listener_);
            throw std::runtime_error("bind/listen");
        }
        socklen_t length = sizeof address;
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
        port_ = ntohs(address.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~ScriptedServer() {
        stop_ = true;
        thread_.join();
        for (auto& [fd, buffer] : clients_) ::close(fd);
        ::close(listener_);
    }
    ScriptedServer(const ScriptedServer&) = delete;
    ScriptedServer& operator=(const ScriptedServer&) = delete;

    std::uint16_t port() const { return port_; }
    // Commands served so far whose first word is `name` (case as sent).
    int count(const std::string& name) {
        std::lock_guard lock(mutex_);
        return counts_[name];
    }

    static std::string bulk(const std::string& text) {
        return "$" + std::to_string(text.size()) + "\r\n" + text + "\r\n";
    }
    static std::string array(const std::vector<std::string>& encoded) {
        std::string out = "*" + std::to_string(encoded.size()) + "\r\n";
        for (const auto& element : encoded) out += element;
        return out;
    }

private:
    void serve() {
        while (!stop_) {
            std::vector<pollfd> fds{{listener_, POLLIN, 0}};
            for (auto& [fd, buffer] : clients_) fds.push_back({fd, POLLIN, 0});
            if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
            if (fds[0].revents & POLLIN) {
                int fd = ::accept(listener_, nullptr, nullptr);
                if (fd >= 0) clients_[fd];
            }
            for (std::size_t i = 1; i < fds.size(); ++i) {
                if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                char chunk[4096];
                auto n = ::read(fds[i].fd, chunk, sizeof chunk);
                if (n <= 0) {
                    ::close(fds[i].fd);
                    clients_.erase(fds[i].fd);
                    continue;
                }
                auto& buffer = clients_[fds[i].fd];
                buffer.append(chunk, static_cast<std::size_t>(n));
                std::vector<std::string> command;
                while (take_command(buffer, command)) {
                    {
                        std::lock_guard lock(mutex_);
                        if (!command.empty()) ++counts_[command[0]];
                    }
                    auto reply = handler_(command);
                    // MSG_NOSIGNAL: the client may have dropped the socket.
                    if (!reply.empty() && ::send(fds[i].fd, reply.data(), reply.size(), MSG_NOSIGNAL) < 0) break;
                }
            }
        }
    }

    // One complete "*N\r\n$len\r\narg\r\n..." from the front of buffer.
    static bool take_command(std::string& buffer, std::vector<std::string>& command) {
        command.clear();
        std::size_t at = 0;
        auto line = [&](std::string& out) {
            auto end = buffer.find("\r\n", at);
            if (end == std::string::npos) return false;
            out = buffer.substr(at, end - at);
            at = end + 2;
            return true;
        };
        std::string header;
        if (!line(header) || header.empty() || header[0] != '*') return false;
        const long count = std::stol(header.substr(1));
        for (long i = 0; i < count; ++i) {
            std::string length_line;
            if (!line(length_line) || length_line.empty() || length_line[0] != '$') return false;
            const auto length = static_cast<std::size_t>(std::stol(length_line.substr(1)));
            if (buffer.size() < at + length + 2) return false;
            command.push_back(buffer.substr(at, length));
            at += length + 2;
        }
        buffer.erase(0, at);
        return true;
    }

    Handler handler_;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::map<int, std::string> clients_;  // serving thread only
    std::mutex mutex_;
    std::map<std::string, int> counts_;
};

}  // namespace dlock::support
