#include "demo_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

namespace dlock::cli {
namespace {

sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    return addr;
}

// A port the kernel had free a moment ago (another program may take it
// before the server binds: the caller tries again).
std::uint16_t unused_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    auto addr = loopback(0);
    socklen_t len = sizeof addr;
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok) throw std::runtime_error("dlock demo: no free loopback port for redis-server");
    return ntohs(addr.sin_port);
}

std::string log_of(const std::string& dir) {
    std::ifstream in(dir + "/redis.log");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

DemoServer::DemoServer() {
    char pattern[] = "/tmp/dlock-demo-XXXXXX";
    if (!::mkdtemp(pattern)) throw std::runtime_error("dlock demo: cannot make a directory under /tmp for redis-server");
    dir_ = pattern;
    for (int attempt = 1;; ++attempt) {
        try {
            port_ = unused_port();
            start();
            return;
        } catch (const std::exception&) {
            end();
            if (attempt == 3) {
                std::error_code ignored;
                std::filesystem::remove_all(dir_, ignored);
                throw;
            }
        }
    }
}

DemoServer::~DemoServer() {
    end();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

void DemoServer::start() {
    std::vector<std::string> args{"redis-server", "--bind", "127.0.0.1", "--port", std::to_string(port_),
                                  "--save", "", "--appendonly", "no", "--dir", dir_, "--logfile",
                                  dir_ + "/redis.log", "--daemonize", "no", "--protected-mode", "no"};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("dlock demo: fork failed starting redis-server");
    if (pid_ == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        ::execvp(argv[0], argv.data());
        ::_exit(127);
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!answers_ping()) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            const auto log = log_of(dir_);
            throw std::runtime_error("dlock demo: redis-server did not start" +
                                     (log.empty() ? std::string(" (is it installed and on PATH? or give --url)")
                                                  : ":\n" + log));
        }
        if (std::chrono::steady_clock::now() > give_up)
            throw std::runtime_error("dlock demo: redis-server did not answer within 30 s (see " + dir_ + "/redis.log)");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

bool DemoServer::answers_ping() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    auto addr = loopback(port_);
    char reply[8] = {};
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                    ::write(fd, "PING\r\n", 6) == 6 && ::read(fd, reply, 7) >= 5 &&
                    std::string_view(reply, 5) == "+PONG";
    ::close(fd);
    return ok;
}

void DemoServer::end() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

}  // namespace dlock::cli
