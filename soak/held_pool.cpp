#include "held_pool.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dlock/error.hpp"

namespace dlock::soak {
namespace {

// How late past its validity a hold may still look held (unreported) before
// it counts as stuck: the contract says "no later than valid_until()"; this
// only absorbs a loaded machine's scheduling.
constexpr auto tolerance = std::chrono::seconds(1);
// Audits cost one round trip per hold; every pass would double Redis's load.
constexpr auto audit_period = std::chrono::seconds(2);

// A loss shows in the hold at once (fencing_token() is 0 from then on); its
// notice, the stop request, follows on the client's I/O thread (lock.hpp),
// behind whatever else that thread has queued, such as a thousand other
// losses after a restart. True when the notice came within `grace`.
bool notice_arrives(std::stop_token lost, Clock::duration grace) {
    std::mutex mutex;
    std::condition_variable_any never_notified;
    std::unique_lock lock(mutex);
    (void)never_notified.wait_for(lock, lost, grace, [] { return false; });
    return lost.stop_requested();
}

}  // namespace

HeldPool::HeldPool(Client& client, Client& checker, int count, std::chrono::milliseconds lease,
                   std::chrono::milliseconds retention)
    : client_(client), checker_(checker) {
    for (int i = 0; i < count; ++i) {
        auto name = "soak:held:" + std::to_string(i);
        auto log = losses_;
        LockOptions options{.lease = lease,
                            .ownership = Ownership::handle,
                            .on_lost =
                                [log](std::string_view name, std::error_code) {
                                    const auto now = Clock::now();
                                    std::lock_guard lock(log->mutex);
                                    log->times.push_back(now);
                                    log->last_by_name[std::string(name)] = now;
                                },
                            .retention = retention};
        slots_.push_back(std::make_unique<Slot>(Slot{name, client_.lock(name, std::move(options))}));
    }
    heartbeat_ = Clock::now().time_since_epoch().count();
}

HeldPool::~HeldPool() = default;

void HeldPool::fail(std::string what) {
    std::lock_guard lock(mutex_);
    if (failures_.size() < 20) failures_.push_back(std::move(what));
}

void HeldPool::keep(Slot& slot) {
    auto& lock = slot.lock;
    if (slot.have && lock.fencing_token() != 0) return;  // held (or its loss is still due)
    if (slot.have) {
        // Lost: it must have been told, and the leftover unlock says so.
        if (!notice_arrives(slot.lost, tolerance))
            fail(slot.name + ": hold ended without its loss being reported");
        std::error_code ec;
        lock.unlock(ec);
        if (ec != errc::lease_lost) fail(slot.name + ": unlock after a loss gave '" + ec.message() + "'");
        slot.have = false;
    }
    std::error_code ec;
    if (!lock.try_lock(ec)) {
        if (ec) {
            std::lock_guard guard(mutex_);
            ++figures_.acquire_errors;
        }
        return;
    }
    const auto token = lock.fencing_token();
    if (token <= slot.last_token)
        fail(slot.name + ": fencing token " + std::to_string(token) + " after " + std::to_string(slot.last_token));
    slot.last_token = token;
    slot.lost = lock.lost_token();
    slot.have = true;
    std::lock_guard guard(mutex_);
    ++figures_.acquisitions;
}

void HeldPool::audit() {
    long checked = 0, mismatches = 0, errors = 0;
    double late = 0;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        auto& slot = *slots_[i];
        const auto token = slot.lock.fencing_token();
        const auto valid_until = slot.lock.valid_until();
        const auto lost = slot.lock.lost_token();
        const auto held = slot.lock.is_held();
        const auto now = Clock::now();
        // Taken back by a taker meanwhile: these figures mix two holds.
        if (slot.lock.fencing_token() != token) continue;
        if (token != 0 && !held && now > valid_until) {
            // Past its validity and not reported lost (yet).
            late = std::max(late, ms(now - valid_until));
            if (now - valid_until > tolerance && !lost.stop_requested())
                fail(slot.name + ": held " + std::to_string(ms(now - valid_until)) +
                     " ms past its validity, loss not reported");
        }
        if (!held) continue;
        LockInfo info;
        try {
            info = inspect_lock(checker_, slot.name);
        } catch (const Error&) {
            ++errors;
            continue;
        }
        ++checked;
        if (!info.held || info.fencing_token != token) {
            ++mismatches;
            suspects_.push_back({i, token, valid_until, lost});
        }
    }
    std::lock_guard lock(mutex_);
    ++figures_.audits;
    figures_.holds_checked += checked;
    figures_.mismatches += mismatches;
    figures_.audit_errors += errors;
    figures_.max_late_ms = std::max(figures_.max_late_ms, late);
}

void HeldPool::remove_behind_back() {
    // The next held one, round robin.
    for (std::size_t tries = 0; tries < slots_.size(); ++tries) {
        auto& slot = *slots_[next_to_remove_];
        const auto index = next_to_remove_;
        next_to_remove_ = (next_to_remove_ + 1) % slots_.size();
        if (!slot.lock.is_held()) continue;
        const auto token = slot.lock.fencing_token();
        const auto valid_until = slot.lock.valid_until();
        const auto lost = slot.lock.lost_token();
        if (slot.lock.fencing_token() != token) continue;  // taken back meanwhile
        // The lock's key, as the README's data model names it.
        const std::string key = "dlock:{" + slot.name + "}";
        const std::string_view args[] = {"DEL", key};
        std::error_code ec;
        const auto deleted = checker_.command(args, ec);
        if (ec || !deleted.is_integer() || deleted.integer != 1) return;  // a restart, or it was lost meanwhile
        suspects_.push_back({index, token, valid_until, lost});
        std::lock_guard guard(mutex_);
        ++figures_.removed;
        return;
    }
}

void HeldPool::settle_suspects() {
    const auto now = Clock::now();
    std::erase_if(suspects_, [&](const Suspect& s) {
        if (s.lost.stop_requested()) {
            // Reported: the contract held. How close to the validity's end?
            std::lock_guard log(losses_->mutex);
            if (auto it = losses_->last_by_name.find(slots_[s.slot]->name); it != losses_->last_by_name.end()) {
                std::lock_guard lock(mutex_);
                figures_.removed_notice_ms = std::max(figures_.removed_notice_ms, ms(it->second - s.valid_until));
            }
            return true;
        }
        if (now < s.valid_until + tolerance) return false;
        {
            std::lock_guard lock(mutex_);
            ++figures_.unreported;
        }
        fail(slots_[s.slot]->name + ": token " + std::to_string(s.token) +
             " believed held but not in Redis, and never reported lost");
        return true;
    });
}

void HeldPool::take_back(std::stop_token stop, std::size_t first) {
    // Bounded by stop; each pass by the client's timeouts.
    while (!stop.stop_requested()) {
        for (auto i = first; i < slots_.size() && !stop.stop_requested(); i += takers) keep(*slots_[i]);
        taker_heartbeats_[first] = Clock::now().time_since_epoch().count();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

void HeldPool::run(std::stop_token stop) {
    auto next_audit = Clock::now() + audit_period;
    {
        // Each taker keeps every takers-th hold; they stop with this thread.
        std::vector<std::jthread> threads;
        for (std::size_t i = 0; i < takers; ++i) {
            taker_heartbeats_[i] = Clock::now().time_since_epoch().count();
            threads.emplace_back([this, stop, i] { take_back(stop, i); });
        }
        watch(stop, next_audit);
    }
    // Holds found missing near the end still owe their loss notice.
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (!suspects_.empty() && Clock::now() < until) {
        settle_suspects();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    settle_suspects();
}

Clock::time_point HeldPool::heartbeat() const {
    auto oldest = heartbeat_.load();
    for (const auto& beat : taker_heartbeats_) oldest = std::min(oldest, beat.load());
    return Clock::time_point(Clock::duration(oldest));
}

void HeldPool::watch(std::stop_token stop, Clock::time_point next_audit) {
    // Bounded by stop.
    while (!stop.stop_requested()) {
        for (; remove_requests_ > 0; --remove_requests_) remove_behind_back();
        if (Clock::now() >= next_audit) {
            audit();
            next_audit = Clock::now() + audit_period;
        }
        settle_suspects();
        int held = 0;
        for (auto& slot : slots_) held += slot->lock.is_held();
        {
            std::lock_guard lock(mutex_);
            figures_.held_now = held;
        }
        heartbeat_ = Clock::now().time_since_epoch().count();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

int HeldPool::release_all() {
    int failed = 0;
    for (auto& slot : slots_) {
        if (!slot->have) continue;
        std::error_code ec;
        slot->lock.unlock(ec);
        failed += ec ? 1 : 0;
        slot->have = false;
    }
    return failed;
}

HeldPoolFigures HeldPool::figures() const {
    std::lock_guard lock(mutex_);
    auto figures = figures_;
    std::lock_guard log(losses_->mutex);
    figures.losses_reported = static_cast<long>(losses_->times.size());
    return figures;
}

std::vector<std::string> HeldPool::failures() const {
    std::lock_guard lock(mutex_);
    return failures_;
}

std::vector<Clock::time_point> HeldPool::loss_times() const {
    std::lock_guard lock(losses_->mutex);
    return losses_->times;
}

}  // namespace dlock::soak
