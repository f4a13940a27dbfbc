// The state behind one dlock::Semaphore: its identity (what every permit
// shares) and the core its Permits and acquisitions go through.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/semaphore.hpp"
#include "hold/hold.hpp"
#include "lock_service.hpp"
#include "lock_validation.hpp"
#include "semaphore_keys.hpp"
#include "semaphore_scripts.hpp"

namespace dlock::detail {

// A permit's lease options, as a Lock's: owned by its Permit (a handle).
inline LockOptions lease_options(const SemaphoreOptions& options) {
    LockOptions lock;
    lock.lease = options.lease;
    lock.renew = options.renew;
    lock.ownership = Ownership::handle;
    lock.on_lost = options.on_lost;
    lock.on_unlock_error = options.on_release_error;
    lock.retention = options.retention;
    return lock;
}

inline void validate_limit(unsigned limit) {
    if (limit == 0 || limit > max_semaphore_limit)
        throw Error(errc::invalid_argument,
                    "semaphore limit must be 1 .. " + std::to_string(max_semaphore_limit));
}

// What every permit of one Semaphore object shares; immutable.
struct SemaphoreIdentity : LockIdentity {
    SemaphoreIdentity(std::string name_, SemaphoreOptions options_, MetricsTag metrics_)
        : LockIdentity(std::move(name_), lease_options(options_), std::move(metrics_)),
          semaphore_keys(name),
          limit(options_.limit),
          set_limit(options_.set_limit),
          waiter_lease(options_.waiter_lease),
          waiter_lease_ms(std::to_string(options_.waiter_lease.count())) {}

    HoldCall renewal(const std::string& permit) const override {
        return {&semaphore_renew_script(), keys_vector(), {permit, lease_ms, retention_ms}};
    }
    HoldCall final_release(const std::string& permit, const std::string&, std::string_view) const override {
        return {&semaphore_release_script(), keys_vector(), {permit, retention_ms, "release"}};
    }
    std::vector<std::string> keys_vector() const {
        return {semaphore_keys.all.begin(), semaphore_keys.all.end()};
    }
    ClientCore::Args keys_args() const { return {views.data(), 6}; }
    ClientCore::Args acquire_keys_args() const { return {views.data(), views.size()}; }

    SemaphoreKeys semaphore_keys;
    std::array<std::string_view, 9> views{semaphore_keys.all[0],         semaphore_keys.all[1],
                                          semaphore_keys.all[2],         semaphore_keys.all[3],
                                          semaphore_keys.all[4],         semaphore_keys.all[5],
                                          semaphore_keys.other_kinds[0], semaphore_keys.other_kinds[1],
                                          semaphore_keys.other_kinds[2]};
    unsigned limit;   // SemaphoreOptions::limit
    bool set_limit;   // SemaphoreOptions::set_limit
    std::chrono::milliseconds waiter_lease;
    std::string waiter_lease_ms;
};

class SemaphoreCore : public std::enable_shared_from_this<SemaphoreCore> {
public:
    SemaphoreCore(std::shared_ptr<ClientCore> client_, std::string name, SemaphoreOptions options)
        : client(std::move(client_)),
          service(LockService::of(*client)),
          identity(make_identity(std::move(name), options, *client)),
          name_inbox(service->name_inbox(identity->semaphore_keys.permits)),
          limit_(identity->limit) {}

    static std::shared_ptr<const SemaphoreIdentity> make_identity(std::string name, SemaphoreOptions& options,
                                                                  const ClientCore& client) {
        validate_lock_request(name, options.lease);
        validate_limit(options.limit);
        validate_retention(options.retention);
        if (options.waiter_lease < std::chrono::milliseconds(30) || options.waiter_lease > std::chrono::hours(1))
            throw Error(errc::invalid_argument, "waiter_lease must be 30 ms .. 1 h");
        auto metrics = MetricsTag::of(client.metrics(), LockKind::semaphore, name);
        return std::make_shared<const SemaphoreIdentity>(std::move(name), std::move(options), std::move(metrics));
    }

    // Blocks until k permits are held (the hold), deadline, stop, or failure
    // (ec set). A deadline already past means one attempt, not in line.
    std::shared_ptr<Hold> acquire(unsigned k, std::optional<LockClock::time_point> deadline, std::stop_token stop,
                                  std::error_code& ec);
    void release(const std::shared_ptr<Hold>& hold, std::error_code& ec);
    unsigned set_limit(unsigned limit);

    const std::shared_ptr<ClientCore> client;
    const std::shared_ptr<LockService> service;
    const std::shared_ptr<const SemaphoreIdentity> identity;
    // Cluster only: where this client hears of its permits' revocations
    // (inbox_of in publish.lua, keyed by the permits key).
    const Subscription name_inbox;

private:
    friend class SemaphoreAcquisition;  // how it acquires (semaphore_acquisition.cpp), driven by the engine
    // The limit this object's requests ask for: SemaphoreOptions::limit,
    // then what its set_limit set (a request with another limit than the
    // server's is refused, errc::limit_mismatch).
    std::atomic<unsigned> limit_;
    // One acquire request for `permit`, waited for until wait_until (none:
    // until known) or stop. Walking away leaves the request to be given up
    // when its outcome comes.
    struct Asked {
        bool known = false;  // false: walked away
        Reply reply;
        LockClock::time_point sent{};
    };
    Asked ask(const std::string& permit, std::string_view k_text, std::string_view mode,
              std::optional<LockClock::time_point> wait_until, std::stop_token stop, std::error_code& ec);
    // A grant confirmed by a request sent at `sent`: a tracked hold, or null
    // (given back) when its lease may be over already.
    std::shared_ptr<Hold> take(const std::string& permit, unsigned k, LockClock::time_point sent) {
        return track(permit, Grant{0, k, sent, sent});
    }
    // A direct grant (serve_line in semaphore_prelude.lua) taken from its
    // notice: the server leased it until the waiter's place would have
    // ended, so it is trusted for waiter_lease from the send time of the
    // last request that kept the place (place_kept), until its first renewal
    // (the lease keeper's, a third of the way into that; a fixed lease's at
    // once) gives it the full lease from that renewal's send. Null (given
    // back) when that is over already.
    std::shared_ptr<Hold> take_direct(const std::string& permit, unsigned k, LockClock::time_point place_kept);
    std::shared_ptr<Hold> track(const std::string& permit, const Grant& grant);

    // "!!" before the '#k': this client takes direct grants and hears them
    // on its inbox (takes_grants and tell_granted in semaphore_prelude.lua),
    // when its inbox listens already (a client whose inbox the server's ACL
    // refuses, or whose first wait it is, is told on the semaphore's
    // channel: '!' alone). The scripts of the previous version read either
    // as ending '!#k' and tell the grant on the channel, which the watch
    // reads too; those from before direct grant read it as part of an
    // opaque id, and call such a waiter rather than grant it.
    std::string new_permit_id(unsigned k) const {
        const bool inbox = service->wait_for_inbox(name_inbox, LockClock::time_point::min(), {});
        return service->id() + ":s" + service->next_operation_id() + (inbox ? "!!#" : "!#") + std::to_string(k);
    }
    LockClock::time_point retry_window_end() const {
        const auto& options = client->options();
        return LockClock::now() + options.connect_timeout + options.command_timeout;
    }
    // Gives up request `permit` on the server without waiting: a grant goes
    // back, a place in line is left, and a late copy never grants.
    void undo(const std::string& permit) {
        std::string_view argv[] = {permit, identity->retention_ms, "undo"};
        service->unattended().send(client, semaphore_release_script(), identity->keys_args(), argv,
                                   retry_window_end());
    }
};

}  // namespace dlock::detail
