#include "outage.hpp"

#include <algorithm>
#include <mutex>
#include <string_view>

#include "runtime/condition.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {

bool transient_failure(std::error_code ec, const Reply& reply) {
    if (ec == errc::connection_lost || ec == errc::connection_refused || ec == errc::not_connected ||
        ec == errc::connect_timeout || ec == errc::command_timeout || ec == errc::not_master ||
        ec == errc::cluster_down || ec == errc::slot_migrating)
        return true;
    if (ec != errc::server_error || !reply.is_error()) return false;
    const std::string_view text = reply.text;
    for (std::string_view prefix : {"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"})
        if (text.starts_with(prefix)) return true;
    return false;
}

bool Outage::ride(std::error_code& ec, bool transient) {
    if (!transient) return false;
    const auto now = Clock::now();
    if (!since_) since_ = now;
    const auto end = deadline_ ? *deadline_ : *since_ + window_;
    if (now >= end) return false;
    error_ = ec;
    ec.clear();
    retry_at_ = std::min(now + pause_, end);
    pause_ = std::min<Clock::duration>(pause_ * 2, longest_pause);
    return true;
}

std::error_code Outage::unanswered_error() const {
    return error_ ? error_ : make_error_code(errc::command_timeout);
}

bool Outage::gave_up(const std::stop_token& stop, std::error_code& ec) const {
    if (stop.stop_requested()) return true;
    if (!deadline_ || Clock::now() < *deadline_) return false;
    ec = error_;
    return true;
}

void pause_until(std::chrono::steady_clock::time_point until, std::stop_token stop) {
    std::mutex mutex;
    Condition never;
    std::unique_lock lock(mutex);
    never.wait_until(lock, stop, until, [] { return false; });
}

}  // namespace dlock::detail
