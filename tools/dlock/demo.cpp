// dlock demo — the bonus pool: processes x threads race for a pool of
// bonuses kept in Redis. Each client locks, reads what is left, takes one if
// any remain, records itself as a winner, and unlocks. Then the same race
// runs without the lock, to show what the lock prevents.
//
// Without a URL (option or environment) it starts its own redis-server on a
// free loopback port and stops it afterwards.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "demo.hpp"
#include "demo_server.hpp"
#include "exposition.hpp"

namespace {

using Settings = dlock::cli::DemoOptions;

constexpr const char* pool_key = "bonus-pool:remaining";
constexpr const char* winners_key = "bonus-pool:winners";

// One client's turn: read, think a moment (so unlocked races really race),
// take one, record the winner.
void take_a_bonus(dlock::Client& client, const std::string& who, dlock::Lock* lock) {
    auto remaining = client.command({"GET", pool_key});
    long left = remaining.is_nil() ? 0 : std::stol(remaining.text);
    if (left <= 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    client.command({"SET", pool_key, std::to_string(left - 1)});
    std::string token = lock ? std::to_string(lock->fencing_token()) : "-";
    client.command({"RPUSH", winners_key, who + " " + token});
}

// Runs in a child process: its own Client, `threads` clients racing. With
// --metrics the locked race's client tells its metrics on metrics_fd.
int race_in_process(const Settings& s, int process, bool locked, int metrics_fd) {
    dlock::Client client(s.url);
    auto lock = client.lock("bonus-pool");
    std::vector<std::thread> threads;
    for (int t = 0; t < s.threads; ++t) {
        threads.emplace_back([&, t] {
            std::string who = "p" + std::to_string(process) + "-t" + std::to_string(t);
            if (locked) {
                std::lock_guard guard(lock);
                take_a_bonus(client, who, &lock);
            } else {
                take_a_bonus(client, who, nullptr);
            }
        });
    }
    for (auto& t : threads) t.join();
    if (metrics_fd >= 0) {
        const auto text = client.metrics().prometheus_text();
        for (std::size_t written = 0; written < text.size();) {
            const auto n = ::write(metrics_fd, text.data() + written, text.size() - written);
            if (n <= 0) return 1;
            written += static_cast<std::size_t>(n);
        }
    }
    return 0;
}

std::string read_all(int fd) {
    std::string text;
    char chunk[4096];
    for (;;) {
        const auto n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return text;
        text.append(chunk, static_cast<std::size_t>(n));
    }
}

struct Outcome {
    std::vector<std::pair<std::string, std::string>> winners;  // client, fencing token
    long remaining = 0;
    std::vector<std::string> metrics;  // with --metrics: each process's exposition
};

Outcome race(dlock::Client& control, const Settings& s, bool locked) {
    control.command({"DEL", winners_key});
    control.command({"SET", pool_key, std::to_string(s.bonuses)});
    std::vector<pid_t> children;
    std::vector<int> metrics_fds;
    const bool tell_metrics = s.metrics && locked;
    for (int p = 0; p < s.processes; ++p) {
        int fds[2] = {-1, -1};
        if (tell_metrics && ::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
        pid_t pid = fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid == 0) {
            int code = 1;
            try {
                if (tell_metrics) ::close(fds[0]);
                code = race_in_process(s, p, locked, fds[1]);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "process %d: %s\n", p, e.what());
            }
            _exit(code);
        }
        if (tell_metrics) {
            ::close(fds[1]);
            metrics_fds.push_back(fds[0]);
        }
        children.push_back(pid);
    }
    Outcome out;
    // Before waiting: a child blocks on a full pipe until it is read.
    for (int fd : metrics_fds) {
        out.metrics.push_back(read_all(fd));
        ::close(fd);
    }
    bool failed = false;
    for (pid_t pid : children) {
        int status = 0;
        waitpid(pid, &status, 0);
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    if (failed) throw std::runtime_error("a racing process failed");
    for (auto& entry : control.command({"LRANGE", winners_key, "0", "-1"}).elements) {
        auto space = entry.text.find(' ');
        out.winners.emplace_back(entry.text.substr(0, space), entry.text.substr(space + 1));
    }
    out.remaining = std::stol(control.command({"GET", pool_key}).text);
    return out;
}

bool tokens_increase(const Outcome& o) {
    unsigned long long last = 0;
    for (auto& [who, token] : o.winners) {
        auto t = std::stoull(token);
        if (t <= last) return false;
        last = t;
    }
    return true;
}

}  // namespace

namespace dlock::cli {

// Errors propagate to main(), which maps them to exit codes like every command's.
int run_demo(DemoOptions s) {
    {
        std::unique_ptr<DemoServer> own_server;
        if (s.url.empty()) {
            own_server = std::make_unique<DemoServer>();
            s.url = own_server->url();
            if (!s.json) std::printf("started redis-server on %s (pid %d)\n", s.url.c_str(), own_server->pid());
        }
        const int clients = s.processes * s.threads;
        Outcome locked, unlocked;
        {
            dlock::Client control(s.url);
            control.wait_connected();
            locked = race(control, s, true);
            unlocked = race(control, s, false);
            control.command({"DEL", pool_key, winners_key});
        }
        const long awarded = static_cast<long>(locked.winners.size());
        const long unlocked_awarded = static_cast<long>(unlocked.winners.size());
        const long overdrawn = std::max(0L, awarded - s.bonuses);
        const long unlocked_overdrawn = std::max(0L, unlocked_awarded - s.bonuses);
        const bool increasing = tokens_increase(locked);
        if (s.json) {
            std::printf("{\"clients\": %d, \"processes\": %d, \"threads\": %d, \"bonuses\": %d, \"awarded\": %ld, "
                        "\"overdrawn\": %ld, \"fencing_tokens_increasing\": %s, \"unlocked_awarded\": %ld, "
                        "\"unlocked_overdrawn\": %ld, \"unlocked_remaining\": %ld, \"winners\": [",
                        clients, s.processes, s.threads, s.bonuses, awarded, overdrawn, increasing ? "true" : "false",
                        unlocked_awarded, unlocked_overdrawn, unlocked.remaining);
            for (std::size_t i = 0; i < locked.winners.size(); ++i)
                std::printf("%s{\"client\": \"%s\", \"fencing_token\": %s}", i ? ", " : "",
                            locked.winners[i].first.c_str(), locked.winners[i].second.c_str());
            std::printf("]}\n");
        } else {
            std::printf("\n%d clients (%d processes x %d threads) race for %d bonuses.\n\n", clients, s.processes,
                        s.threads, s.bonuses);
            std::printf("With dlock:\n  #   client      fencing token\n");
            for (std::size_t i = 0; i < locked.winners.size(); ++i)
                std::printf("  %-3zu %-11s %s\n", i + 1, locked.winners[i].first.c_str(),
                            locked.winners[i].second.c_str());
            std::printf("  awarded %ld of %d, overdrawn by %ld, fencing tokens %s\n\n", awarded, s.bonuses, overdrawn,
                        increasing ? "strictly increasing" : "NOT increasing");
            std::printf("Without a lock (same race, same pool):\n");
            std::printf("  awarded %ld of %d: overdrawn by %ld; the pool still shows %ld left (lost updates)\n",
                        unlocked_awarded, s.bonuses, unlocked_overdrawn, unlocked.remaining);
        }
        if (s.metrics) {
            // The locked race's, all processes added up; after the summary
            // (on stdout too), or alone after the JSON line.
            if (!s.json) std::printf("\nMetrics of the race with dlock (%d processes added up):\n", s.processes);
            std::fputs(sum_expositions(locked.metrics).c_str(), stdout);
        }
        // Every bonus goes, unless there are fewer clients than bonuses.
        const long expected = std::min<long>(s.bonuses, clients);
        if (awarded == expected && increasing) return exit_ok;
        complain("the locked race awarded " + std::to_string(awarded) + " bonuses, expected " +
                 std::to_string(expected) + (increasing ? "" : ", and fencing tokens did not increase"));
        return exit_internal;
    }
}

}  // namespace dlock::cli
