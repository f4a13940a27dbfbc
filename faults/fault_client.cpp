// One client of the fault-injection suite (faults/README.md). It takes one
// lock again and again and, inside each critical section, writes to a
// separate storage server twice:
//   - the unfenced control: GET a counter, work, SET it + 1, never checking
//     whether the lock is still held (a naive client; the checker expects it
//     to lose updates when a holder is paused past its lease, or it could not
//     see violations at all);
//   - a fenced write: a storage-side script (fenced_write.lua) that accepts
//     the write only if its fencing token is not below the largest it has seen.
// Every event goes to a log of JSON lines with wall-clock times (all clients
// run on one machine, so one clock), which the checker reads.
//
//   dlock_fault_client --lock "URL[ URL...]" --storage URL --name NAME --id ID
//                      --log FILE --fenced-sha SHA1 [--lease-ms 1000] [--seconds 20] [--work-ms 40]
//                      [--replica-ack N] [--ack-timeout-ms 200] [--kind lock|fair|multi|permit|read|write] [--limit N]
// Several --lock URLs (separated by spaces: a Sentinel or Cluster URL has
// commas of its own) make a Redlock over those masters. --kind multi takes a
// MultiLock over NAME:a, NAME:b and NAME:c (listed in an order that depends
// on ID, so clients list them differently) and fences its writes with the
// token of NAME:a. --kind permit holds one of --limit permits of semaphore
// NAME; permits carry no fencing token, so its sections write nothing and
// the checker counts the permits held at once against the limit. --kind read
// and --kind write take the two sides of read-write lock NAME: a reader's
// sections may overlap other readers', and write nothing; a writer's are
// exclusive and write as a lock's do.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/semaphore.hpp"

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

namespace {

struct Settings {
    std::vector<std::string> lock_urls;
    std::string storage_url, name, id, log_path, fenced_sha, kind = "lock";
    std::chrono::milliseconds lease{1000}, work{40}, ack_timeout{200};
    std::chrono::seconds run_for{20};
    unsigned replica_ack = 0;
    unsigned limit = 2;  // --kind permit
};

double wall_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A steady-clock instant as wall-clock seconds, for the checker.
double as_wall(SteadyClock::time_point t) {
    return wall_now() + std::chrono::duration<double>(t - SteadyClock::now()).count();
}

class Log {
public:
    explicit Log(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {
        if (!file_) throw std::runtime_error("cannot open log " + path);
    }
    ~Log() { std::fclose(file_); }
    // One JSON object per line; `fields` is the rest of the object, already JSON.
    void write(const std::string& event, const std::string& fields) {
        std::lock_guard lock(mutex_);
        std::fprintf(file_, "{\"ev\":\"%s\",\"t\":%.6f%s%s}\n", event.c_str(), wall_now(), fields.empty() ? "" : ",",
                     fields.c_str());
        std::fflush(file_);  // a client killed -9 keeps what it logged
    }

private:
    std::FILE* file_;
    std::mutex mutex_;
};

std::string quoted(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;
        out += c;
    }
    return out + "\"";
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (;;) {
        auto end = text.find(separator, start);
        parts.push_back(text.substr(start, end - start));
        if (end == std::string::npos) return parts;
        start = end + 1;
    }
}

Settings parse(int argc, char** argv) {
    Settings s;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        auto ms = [&] { return std::chrono::milliseconds(std::stoll(value)); };
        if (flag == "--lock") s.lock_urls = split(value, ' ');
        else if (flag == "--storage") s.storage_url = value;
        else if (flag == "--name") s.name = value;
        else if (flag == "--id") s.id = value;
        else if (flag == "--log") s.log_path = value;
        else if (flag == "--fenced-sha") s.fenced_sha = value;
        else if (flag == "--lease-ms") s.lease = ms();
        else if (flag == "--work-ms") s.work = ms();
        else if (flag == "--ack-timeout-ms") s.ack_timeout = ms();
        else if (flag == "--seconds") s.run_for = std::chrono::seconds(std::stoll(value));
        else if (flag == "--replica-ack") s.replica_ack = static_cast<unsigned>(std::stoul(value));
        else if (flag == "--kind") s.kind = value;
        else if (flag == "--limit") s.limit = static_cast<unsigned>(std::stoul(value));
        else throw std::invalid_argument("unknown flag " + flag);
    }
    if (s.lock_urls.empty() || s.storage_url.empty() || s.name.empty() || s.id.empty() || s.log_path.empty() ||
        s.fenced_sha.empty())
        throw std::invalid_argument("--lock, --storage, --name, --id, --log and --fenced-sha are required");
    if (s.kind != "lock" && s.kind != "fair" && s.kind != "multi" && s.kind != "permit" && s.kind != "read" &&
        s.kind != "write")
        throw std::invalid_argument("unknown --kind " + s.kind);
    if (s.kind != "lock" && s.lock_urls.size() > 1) throw std::invalid_argument("--kind " + s.kind + " takes one --lock URL");
    return s;
}

// The critical section: the unfenced control, then the fenced write; for a
// permit (no token, several holders by design) only the work.
template <typename Sample>
void critical_section(dlock::Client& storage, const Settings& s, std::uint64_t token,
                      std::mt19937& random, Log& log, Sample&& sample) {
    const bool writes = s.kind != "permit" && s.kind != "read";
    auto before = writes ? storage.command({"GET", "control:counter"}) : dlock::Reply{};
    const long long value = before.is_nil() ? 0 : std::stoll(before.text);
    std::uniform_int_distribution<long long> jitter(s.work.count() / 2, s.work.count() * 3 / 2);
    // The work, in steps that sample valid_until: a hold that is lost has
    // none, and the checker needs the last one (a process paused here hears
    // of the loss only when it resumes, long after its validity ended).
    const auto work_end = SteadyClock::now() + std::chrono::milliseconds(jitter(random));
    while (SteadyClock::now() < work_end) {
        sample();
        std::this_thread::sleep_for(2ms);
    }
    if (!writes) return;
    storage.command({"SET", "control:counter", std::to_string(value + 1)});
    const auto token_text = std::to_string(token);
    // faults/fenced_write.lua, loaded into the storage by the suite.
    auto reply = storage.command(
        {"EVALSHA", s.fenced_sha, "3", "fenced:largest", "fenced:accepted", "fenced:rejected", token_text, s.id});
    log.write("write", "\"token\":" + token_text + ",\"read\":" + std::to_string(value) +
                           ",\"accepted\":" + (reply.integer == 1 ? "true" : "false"));
}

// The last valid_until seen of the current hold, as wall-clock seconds.
std::atomic<double> last_valid_until{0};

// What the checker needs to know of a section beyond its times.
std::string side_fields(const Settings& s) {
    if (s.kind == "read") return ",\"side\":\"shared\"";
    if (s.kind != "permit") return ",\"side\":\"exclusive\"";
    return ",\"side\":\"permit\",\"permits\":1,\"limit\":" + std::to_string(s.limit);
}

// One permit of semaphore NAME as the workload sees a lock.
class PermitAsLock {
public:
    PermitAsLock(dlock::Client& client, const Settings& s, dlock::LockOptions options)
        : semaphore_(client, s.name,
                     {.limit = s.limit, .lease = options.lease, .on_lost = std::move(options.on_lost)}) {}
    bool try_lock_until(SteadyClock::time_point deadline) {
        permit_ = semaphore_.try_acquire_until(deadline, 1, std::stop_token{});
        return static_cast<bool>(permit_);
    }
    std::uint64_t fencing_token() const { return 0; }
    SteadyClock::time_point valid_until() const { return permit_.valid_until(); }
    bool is_held() const { return permit_.is_held(); }
    void unlock(std::error_code& ec) { permit_.release(ec); }

private:
    dlock::Semaphore semaphore_;
    dlock::Permit permit_;
};

// One side of a read-write lock as the workload sees a lock.
class RwSide {
public:
    RwSide(dlock::Client& client, const Settings& s, dlock::LockOptions options)
        : lock_(client, s.name, {.lease = options.lease, .on_lost = std::move(options.on_lost)}),
          read_(s.kind == "read") {}
    bool try_lock_until(SteadyClock::time_point deadline) {
        return read_ ? lock_.try_lock_shared_until(deadline, std::stop_token{})
                     : lock_.try_lock_until(deadline, std::stop_token{});
    }
    std::uint64_t fencing_token() const { return read_ ? lock_.shared_fencing_token() : lock_.fencing_token(); }
    SteadyClock::time_point valid_until() const { return read_ ? lock_.shared_valid_until() : lock_.valid_until(); }
    bool is_held() const { return read_ ? lock_.is_held_shared() : lock_.is_held(); }
    void unlock(std::error_code& ec) { read_ ? lock_.unlock_shared(ec) : lock_.unlock(ec); }

private:
    dlock::RwLock lock_;
    bool read_;
};

// A MultiLock as the workload sees a lock: one token to fence with.
class FencedMultiLock {
public:
    FencedMultiLock(dlock::Client& client, const Settings& s, dlock::LockOptions options)
        : lock_(client, names(s), std::move(options)), fenced_by_(s.name + ":a") {}
    bool try_lock_until(SteadyClock::time_point deadline) { return lock_.try_lock_until(deadline); }
    std::uint64_t fencing_token() const { return lock_.fencing_token(fenced_by_); }
    SteadyClock::time_point valid_until() const { return lock_.valid_until(); }
    bool is_held() const { return lock_.is_held(); }
    void unlock(std::error_code& ec) { lock_.unlock(ec); }

private:
    // Each client lists the names in its own order; the MultiLock must take
    // them in one order whatever the list.
    static std::vector<std::string> names(const Settings& s) {
        std::vector<std::string> names{s.name + ":a", s.name + ":b", s.name + ":c"};
        std::rotate(names.begin(), names.begin() + std::hash<std::string>{}(s.id) % names.size(), names.end());
        if (std::hash<std::string>{}(s.id) % 2) std::reverse(names.begin(), names.end());
        return names;
    }
    dlock::MultiLock lock_;
    std::string fenced_by_;
};

template <typename AnyLock>
void run(AnyLock& lock, dlock::Client& storage, const Settings& s, Log& log) {
    auto sample = [&lock] {
        const auto until = lock.valid_until();
        if (until != SteadyClock::time_point{}) last_valid_until = as_wall(until);
    };
    std::mt19937 random(std::random_device{}());
    const auto end = SteadyClock::now() + s.run_for;
    while (SteadyClock::now() < end) {
        try {
            if (!lock.try_lock_until(end)) break;
        } catch (const dlock::Error& e) {
            log.write("error", "\"during\":\"lock\",\"what\":" + quoted(e.what()));
            std::this_thread::sleep_for(50ms);
            continue;
        }
        const auto token = lock.fencing_token();
        sample();
        log.write("acquired", "\"token\":" + std::to_string(token) +
                                  ",\"valid_until\":" + std::to_string(last_valid_until.load()) + side_fields(s));
        try {
            critical_section(storage, s, token, random, log, sample);
        } catch (const std::exception& e) {
            log.write("error", "\"during\":\"work\",\"what\":" + quoted(e.what()));
        }
        // Entitlement ends here at the latest: the release may let another
        // client in before unlock() returns.
        sample();
        const bool held = lock.is_held();
        log.write("releasing", "\"token\":" + std::to_string(token) + ",\"held\":" + (held ? "true" : "false") +
                                   ",\"valid_until\":" + std::to_string(last_valid_until.load()));
        std::error_code ec;
        lock.unlock(ec);
        log.write("released", "\"token\":" + std::to_string(token) + ",\"error\":" + quoted(ec ? ec.message() : ""));
        std::uniform_int_distribution<long long> pause(0, s.work.count() / 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(pause(random)));
    }
}

}  // namespace

int main(int argc, char** argv) {
    Settings s;
    try {
        s = parse(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dlock_fault_client: %s\n", e.what());
        return 64;
    }
    Log log(s.log_path);
    auto on_lost = [&log](std::string_view, std::error_code reason) {
        log.write("lost", "\"reason\":" + quoted(reason.message()) +
                              ",\"valid_until\":" + std::to_string(last_valid_until.load()));
    };
    try {
        dlock::Client storage(s.storage_url);
        log.write("start", "\"id\":" + quoted(s.id) + ",\"pid\":" + std::to_string(getpid()) +
                               ",\"lease_ms\":" + std::to_string(s.lease.count()));
        if (s.lock_urls.size() == 1) {
            dlock::Client client(s.lock_urls[0]);
            dlock::LockOptions options{.lease = s.lease, .on_lost = on_lost};
            if (s.replica_ack > 0) options.replica_ack = {.replicas = s.replica_ack, .timeout = s.ack_timeout};
            if (s.kind == "multi") {
                FencedMultiLock lock(client, s, options);
                run(lock, storage, s, log);
            } else if (s.kind == "permit") {
                PermitAsLock lock(client, s, options);
                run(lock, storage, s, log);
            } else if (s.kind == "read" || s.kind == "write") {
                RwSide lock(client, s, options);
                run(lock, storage, s, log);
            } else if (s.kind == "fair") {
                dlock::FairLock lock(client, s.name, options);
                run(lock, storage, s, log);
            } else {
                dlock::Lock lock(client, s.name, options);
                run(lock, storage, s, log);
            }
        } else {
            dlock::Masters masters(s.lock_urls);
            dlock::Redlock lock(masters, s.name, {.lease = s.lease, .on_lost = on_lost});
            run(lock, storage, s, log);
        }
        log.write("end", "");
    } catch (const std::exception& e) {
        log.write("error", "\"during\":\"setup\",\"what\":" + quoted(e.what()));
        return 1;
    }
    return 0;
}
