#include "redis_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::support {
namespace {

std::string make_temp_dir(const char* prefix) {
    std::string pattern = std::string("/tmp/") + prefix + "XXXXXX";
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    return pattern;
}

void run_or_throw(const std::string& command) {
    if (std::system((command + " >/dev/null 2>&1").c_str()) != 0)
        throw std::runtime_error("command failed: " + command);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// The program's path, as execvp would find it, looked up in the parent.
std::string find_program(const std::string& name) {
    if (name.find('/') != std::string::npos) return name;
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (std::size_t start = 0; start <= dirs.size();) {
        auto end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        std::string candidate = (end > start ? dirs.substr(start, end - start) : ".") + "/" + name;
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
        start = end + 1;
    }
    return name;
}

// Everything the child needs is made before fork(): the parent has other
// threads (clients' I/O threads), and one of them may hold the allocator's
// lock at the fork, so a malloc in the child could wait forever (seen under
// AddressSanitizer: a restarted server that never started). The child only
// makes async-signal-safe calls.
pid_t spawn(const std::vector<std::string>& args) {
    const std::string program = find_program(args.at(0));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);  // the parent died before the signal was set
        execve(program.c_str(), argv.data(), environ);
        _exit(127);
    }
    return pid;
}

}  // namespace

std::uint16_t free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        close(fd);
        throw std::runtime_error("bind failed");
    }
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
}

const TlsFiles& TlsFiles::get() {
    static const TlsFiles files = [] {
        auto dir = make_temp_dir("dlock-tls-");
        TlsFiles f{dir + "/ca.crt", dir + "/server.crt", dir + "/server.key", dir + "/other-ca.crt",
                   dir + "/client.crt", dir + "/client.key"};
        auto make_ca = [&](const std::string& name) {
            run_or_throw("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + name + " -keyout " + dir +
                         "/" + name + ".key -out " + dir + "/" + name + ".crt");
        };
        make_ca("ca");
        make_ca("other-ca");
        std::ofstream(dir + "/san.ext") << "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n";
        run_or_throw("openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout " + f.server_key + " -out " +
                     dir + "/server.csr");
        run_or_throw("openssl x509 -req -in " + dir + "/server.csr -CA " + f.ca_cert + " -CAkey " + dir +
                     "/ca.key -CAcreateserial -days 2 -extfile " + dir + "/san.ext -out " + f.server_cert);
        run_or_throw("openssl req -newkey rsa:2048 -nodes -subj /CN=dlock-client -keyout " + f.client_key + " -out " +
                     dir + "/client.csr");
        run_or_throw("openssl x509 -req -in " + dir + "/client.csr -CA " + f.ca_cert + " -CAkey " + dir +
                     "/ca.key -CAcreateserial -days 2 -out " + f.client_cert);
        return f;
    }();
    return files;
}

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)) {
    dir_ = make_temp_dir("dlock-redis-");
    for (int tries = 0;; ++tries) {
        do port_ = free_port();
        while (port_ > options_.max_port);
        try {
            start();
            return;
        } catch (const std::exception&) {
            // The port may have been taken between free_port() and the bind.
            if (tries == 4) throw;
        }
    }
}

RedisServer::~RedisServer() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    std::system(("rm -rf " + dir_).c_str());
}

std::string RedisServer::uri() const {
    std::string auth = options_.password.empty() ? "" : ":" + options_.password + "@";
    return std::string(options_.tls ? "rediss://" : "redis://") + auth + "127.0.0.1:" + std::to_string(port_);
}

std::vector<std::string> RedisServer::arguments() const {
    std::vector<std::string> args{"redis-server"};
    if (!options_.config_text.empty()) args.push_back(dir_ + "/redis.conf");
    args.insert(args.end(), {"--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                  "--dir", dir_, "--logfile", dir_ + "/redis.log", "--daemonize", "no",
                                  "--protected-mode", "no"});
    if (options_.tls) {
        const auto& tls = TlsFiles::get();
        args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_), "--tls-cert-file",
                                 tls.server_cert, "--tls-key-file", tls.server_key, "--tls-ca-cert-file",
                                 tls.ca_cert, "--tls-auth-clients", options_.tls_require_client_cert ? "yes" : "no"});
    } else {
        args.insert(args.end(), {"--port", std::to_string(port_)});
    }
    if (options_.unix_socket) args.insert(args.end(), {"--unixsocket", socket_path(), "--unixsocketperm", "700"});
    if (!options_.password.empty()) args.insert(args.end(), {"--requirepass", options_.password});
    for (const auto& user : options_.acl_users) {
        args.push_back("--user");
        args.insert(args.end(), user.begin(), user.end());
    }
    args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
    return args;
}

void RedisServer::start() {
    if (pid_ > 0) return;
    std::ofstream(dir_ + "/redis.log", std::ios::trunc);
    if (!options_.config_text.empty() && access((dir_ + "/redis.conf").c_str(), F_OK) != 0)
        std::ofstream(dir_ + "/redis.conf") << options_.config_text;
    pid_ = spawn(arguments());
    paused_ = false;
    wait_ready();
}

void RedisServer::wait_ready() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // generous: a loaded machine
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            throw std::runtime_error("redis-server exited at start:\n" + read_file(dir_ + "/redis.log"));
        }
        const auto log = read_file(dir_ + "/redis.log");
        // A sentinel says neither: it names itself once it listens.
        if (log.find("Ready to accept connections") != std::string::npos ||
            log.find("Sentinel ID is") != std::string::npos)
            return;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill();
    throw std::runtime_error("redis-server did not become ready within 30 s");
}

void RedisServer::stop() {
    if (pid_ <= 0) return;
    if (paused_) resume();
    ::kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

void RedisServer::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    paused_ = false;
}

void RedisServer::pause() {
    if (pid_ > 0 && !paused_) {
        ::kill(pid_, SIGSTOP);
        paused_ = true;
    }
}

void RedisServer::resume() {
    if (pid_ > 0 && paused_) {
        ::kill(pid_, SIGCONT);
        paused_ = false;
    }
}

long RedisServer::command_calls(const std::string& command) const {
    auto info = cli({"INFO", "commandstats"});
    std::string field = "cmdstat_" + command + ":calls=";
    auto pos = info.find(field);
    return pos == std::string::npos ? 0 : std::stol(info.substr(pos + field.size()));
}

std::string RedisServer::cli(const std::vector<std::string>& args) const {
    std::string command = "redis-cli --no-auth-warning -p " + std::to_string(port_);
    if (options_.tls) {
        const auto& tls = TlsFiles::get();
        command += " --tls --cacert " + tls.ca_cert + " --cert " + tls.client_cert + " --key " + tls.client_key;
    }
    if (!options_.password.empty()) command += " -a '" + options_.password + "'";
    for (const auto& a : args) command += " '" + a + "'";
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) throw std::runtime_error("popen failed");
    std::string out;
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    pclose(pipe);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

std::uint64_t RedisServer::time_us() const {
    auto text = cli({"TIME"});  // "<seconds>\n<microseconds>"
    auto newline = text.find('\n');
    return std::stoull(text.substr(0, newline)) * 1'000'000 + std::stoull(text.substr(newline + 1));
}

}  // namespace dlock::support
