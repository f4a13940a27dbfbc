// The checks every lock kind makes on its name and lease before it talks to
// any server.
#pragma once

#include <chrono>
#include <string>

#include "dlock/error.hpp"
#include "dlock/lock.hpp"

namespace dlock::detail {

inline void validate_lock_request(const std::string& name, std::chrono::milliseconds lease) {
    if (name.empty()) throw Error(errc::invalid_argument, "lock name is empty");
    if (name.size() > max_lock_name_bytes)
        throw Error(errc::invalid_argument, "lock name is longer than " + std::to_string(max_lock_name_bytes) + " bytes");
    if (lease < min_lease)
        throw Error(errc::invalid_argument, "lease " + std::to_string(lease.count()) + " ms is shorter than " +
                                                std::to_string(min_lease.count()) + " ms");
    if (lease > max_lease) throw Error(errc::invalid_argument, "lease is longer than 24 h");
}

inline void validate_retention(std::chrono::milliseconds retention) {
    if (retention < std::chrono::seconds(1) || retention > std::chrono::hours(24 * 30))
        throw Error(errc::invalid_argument, "retention must be 1 s .. 30 days");
}

inline void validate_handoff_slice(std::chrono::microseconds slice) {
    if (slice < std::chrono::microseconds::zero() || slice > std::chrono::minutes(1))
        throw Error(errc::invalid_argument, "handoff_slice must be 0 .. 1 min");
}

inline void validate_waiter_lease(std::chrono::milliseconds waiter_lease) {
    if (waiter_lease < std::chrono::milliseconds(100) || waiter_lease > std::chrono::minutes(1))
        throw Error(errc::invalid_argument, "waiter_lease must be 100 ms .. 1 min");
}

inline void validate_replica_ack(const ReplicaAck& ack) {
    if (ack.replicas == 0) return;
    if (ack.timeout < std::chrono::milliseconds(1) || ack.timeout > std::chrono::hours(1))
        throw Error(errc::invalid_argument, "replica_ack.timeout must be 1 ms .. 1 h");
}

}  // namespace dlock::detail
