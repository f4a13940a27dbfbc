// A thousand (or so) locks held for the whole soak and renewed by the lease
// keeper. Eight threads take back every hold that was lost, each its share:
// a take is a write the server makes durable before it answers (the soak's
// server fsyncs every write), about 4 ms on a loaded 2-core machine, so one
// thread taking a thousand back one after the other needed 4 s and more,
// while the server's fsync serves every take that came in meanwhile. One
// more thread audits the holds against Redis.
//
// The audit holds the client to its contract: every hold the client
// believes it has (is_held()) exists in Redis with the same fencing token
// (so the same grant, the same owner), or is reported lost no later than
// its validity ends (plus a tolerance for a loaded machine). A hold that
// ends without its lost_token() requested, or that sits past its validity
// still unreported, is a failure.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dlock/client.hpp"

namespace dlock::soak {

using Clock = std::chrono::steady_clock;

// A duration in milliseconds, as the soak's reports give them.
inline double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct HeldPoolFigures {
    long acquisitions = 0;      // fresh grants, first ones included
    long losses_reported = 0;   // on_lost calls
    long audits = 0;            // passes over every hold
    long holds_checked = 0;     // holds compared with Redis
    long mismatches = 0;        // held locally, other or no grant in Redis: must be reported lost in time
    long audit_errors = 0;      // Redis could not be asked (restarts)
    long acquire_errors = 0;
    long removed = 0;           // holds whose key was deleted behind the client's back
    long unreported = 0;        // of the mismatched and removed: not reported lost in time (a failure)
    double max_late_ms = 0;     // longest a hold sat past its validity unreported (0: never)
    // Of the holds found missing in Redis (removed, or seen by an audit): the
    // latest loss notice relative to the end of validity (< 0: before it).
    double removed_notice_ms = -1e9;
    int held_now = 0;
};

class HeldPool {
public:
    // Holds `count` locks named prefix + index with `lease`, owned by their
    // Lock objects (any thread may look at them).
    HeldPool(Client& client, Client& checker, int count, std::chrono::milliseconds lease,
             std::chrono::milliseconds retention);
    ~HeldPool();

    // Keeps and audits the holds until stop; a pass is bounded by the
    // client's timeouts even when Redis is down.
    void run(std::stop_token stop);
    // Asks the keeping thread to delete one held lock's key in Redis behind
    // the client's back: the client must report that hold lost in time.
    void remove_one_behind_its_back() { remove_requests_.fetch_add(1); }
    // Releases every hold; returns how many unlock() calls failed.
    int release_all();

    HeldPoolFigures figures() const;
    std::vector<std::string> failures() const;
    // When the slowest of the pool's threads last finished a pass (a
    // watchdog reads it).
    Clock::time_point heartbeat() const;
    // on_lost calls since the start, and the time of each.
    std::vector<Clock::time_point> loss_times() const;

private:
    struct Slot {
        std::string name;
        Lock lock;
        bool have = false;             // acquired and not yet seen lost
        std::stop_token lost;          // of the current hold
        std::uint64_t last_token = 0;  // tokens must keep increasing per name
    };
    struct Suspect {
        std::size_t slot;
        std::uint64_t token;
        Clock::time_point valid_until;
        std::stop_token lost;
    };

    // on_lost runs on the client's I/O thread, possibly late: it holds this,
    // not the pool.
    struct LossLog {
        std::mutex mutex;
        std::vector<Clock::time_point> times;
        std::unordered_map<std::string, Clock::time_point> last_by_name;
    };

    static constexpr std::size_t takers = 8;

    void take_back(std::stop_token stop, std::size_t first);
    void watch(std::stop_token stop, Clock::time_point next_audit);
    void keep(Slot& slot);
    void audit();
    void remove_behind_back();
    void settle_suspects();
    void fail(std::string what);

    Client& client_;
    Client& checker_;
    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<Suspect> suspects_;
    std::atomic<Clock::rep> heartbeat_{0};
    std::atomic<Clock::rep> taker_heartbeats_[takers]{};
    std::atomic<int> remove_requests_{0};
    std::size_t next_to_remove_ = 0;
    mutable std::mutex mutex_;  // guards what follows
    HeldPoolFigures figures_;
    std::vector<std::string> failures_;
    std::shared_ptr<LossLog> losses_ = std::make_shared<LossLog>();
};

}  // namespace dlock::soak
