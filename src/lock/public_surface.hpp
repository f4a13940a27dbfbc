// The calls every lock kind's public class makes, written once: lock(),
// lock(stop), try_lock*() in their throwing and error_code forms, unlock()
// and unlock(ec), and the queries about the caller's own hold.
//
// What they share: a moved-from object (no core) gives
// errc::invalid_argument, thrown or in ec, and describes no hold; the
// error_code forms let nothing escape (an allocation failure is
// std::errc::not_enough_memory); unlock() reports a failure to the kind's
// on_unlock_error and never throws.
//
// A kind supplies an Access, a small value made per call:
//   using Core = ...;
//   static constexpr const char* kind;                     // "dlock::Lock", for the moved-from error
//   bool acquire(Core&, std::optional<LockClock::time_point> deadline, std::stop_token, std::error_code&);
//   [[noreturn]] void fail(Core&, std::error_code, std::string_view call);  // throws what the kind throws
//   void release(Core&, std::error_code&);
//   void report(Core&, std::error_code) noexcept;          // an unlock() failure to on_unlock_error
// and, for the hold queries, std::shared_ptr<Hold> own_hold(const Core&).
#pragma once

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/error.hpp"
#include "hold/hold_queries.hpp"

namespace dlock::detail {

template <typename Access>
struct PublicSurface {
    using Core = typename Access::Core;
    using CorePtr = std::shared_ptr<Core>;

    // The throwing forms: true when acquired, false on contention or stop.
    static bool acquire(const CorePtr& core, Access access, std::optional<LockClock::time_point> deadline,
                        std::stop_token stop, std::string_view call) {
        if (!core) throw Error(errc::invalid_argument, std::string(call) + " on a moved-from " + Access::kind);
        std::error_code ec;
        const bool acquired = access.acquire(*core, deadline, std::move(stop), ec);
        if (ec) access.fail(*core, ec, call);
        return acquired;
    }

    static bool acquire(const CorePtr& core, Access access, LockClock::time_point deadline,
                        std::error_code& ec) noexcept {
        ec.clear();
        if (!core) {
            ec = errc::invalid_argument;
            return false;
        }
        try {
            return access.acquire(*core, deadline, {}, ec);
        } catch (const Error& e) {
            ec = e.code();
        } catch (...) {
            ec = std::make_error_code(std::errc::not_enough_memory);
        }
        return false;
    }

    static void release(const CorePtr& core, Access access, std::error_code& ec) noexcept {
        ec.clear();
        if (!core) {
            ec = errc::invalid_argument;
            return;
        }
        try {
            access.release(*core, ec);
        } catch (...) {
            ec = std::make_error_code(std::errc::not_enough_memory);
        }
    }

    // unlock(): a failure goes to on_unlock_error (a moved-from object has none).
    static void release_reported(const CorePtr& core, Access access) noexcept {
        std::error_code ec;
        release(core, access, ec);
        if (core) access.report(*core, ec);
    }

    static std::shared_ptr<Hold> own_hold(const CorePtr& core, const Access& access) {
        return core ? access.own_hold(*core) : nullptr;
    }
};

// The Access of a kind whose core names its holds by owner (Lock, Redlock):
// a kind adds its `kind`, and may hide fail() with its own.
template <typename CoreType>
struct OwnedAccess {
    using Core = CoreType;
    bool acquire(Core& core, std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
        return core.acquire(deadline, std::move(stop), ec);
    }
    [[noreturn]] void fail(Core& core, std::error_code ec, std::string_view call) {
        throw_if(ec, std::string(call) + " " + core.identity->name);
        throw Error(ec);
    }
    void release(Core& core, std::error_code& ec) { core.release(ec); }
    void report(Core& core, std::error_code ec) noexcept { report_unlock_error(*core.identity, ec); }
    std::shared_ptr<Hold> own_hold(const Core& core) const { return core.hold_of(core.current_owner()); }
};

}  // namespace dlock::detail
