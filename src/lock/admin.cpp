// Operator tools: look at a lock, break a lock.
#include <algorithm>
#include <array>
#include <condition_variable>

#include "runtime/condition.hpp"
#include <mutex>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/semaphore.hpp"
#include "hold/lock_keys.hpp"
#include "semaphore_keys.hpp"
#include "redis/client_core.hpp"
#include "redis/cluster_slots.hpp"
#include "lock_scripts.hpp"
#include "semaphore_scripts.hpp"
#include "script_replies.hpp"

namespace dlock {
namespace {

void validate_name(std::string_view name) {
    if (name.empty()) throw Error(errc::invalid_argument, "lock name is empty");
    if (name.size() > max_lock_name_bytes) throw Error(errc::invalid_argument, "lock name is too long");
}

// SCAN's page size: large enough for few round trips, small enough that one
// SCAN step stays short on the server.
constexpr std::string_view scan_count = "1000";

// inspect.lua's keys of one name: every kind's.
struct InspectKeys {
    explicit InspectKeys(std::string_view name) : lock(name), semaphore(name) {}
    detail::LockKeys lock;
    detail::SemaphoreKeys semaphore;
    std::string reader_state = lock.reader_state(), waiting_writers = lock.waiting_writers();
    std::array<std::string_view, 9> keys() const {
        return {lock.lock,           lock.fence(),         lock.readers(),
                reader_state,        lock.places(),        waiting_writers,
                semaphore.all[0],    semaphore.all[1],     semaphore.all[3]};
    }
};

// Inspects names in one pipelined batch; waits for every answer.
void inspect_batch(Client& client, std::vector<std::string> names, std::vector<std::pair<std::string, LockInfo>>& out) {
    std::mutex mutex;
    detail::Condition done;
    std::size_t pending = names.size();
    std::vector<Reply> replies(names.size());
    std::error_code failure;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const InspectKeys keys(names[i]);
        const auto k = keys.keys();
        client.eval_async(detail::inspect_script(), k, {}, [&, i](std::error_code ec, Reply&& reply) {
            std::lock_guard lock(mutex);
            if (ec && !failure) failure = ec;
            replies[i] = std::move(reply);
            if (--pending == 0) done.notify_one();
        });
    }
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return pending == 0; });
    for (std::size_t i = 0; i < names.size(); ++i)
        if (replies[i].is_error()) throw Error(replies[i].error_code(), replies[i].text);
    throw_if(failure, "inspecting locks");
    for (std::size_t i = 0; i < names.size(); ++i) {
        LockInfo info = detail::read_inspect(replies[i]);
        if (info.held) out.emplace_back(std::move(names[i]), std::move(info));
    }
}

}  // namespace

LockInfo inspect_lock(Client& client, std::string_view name) {
    validate_name(name);
    const InspectKeys keys(name);
    const auto k = keys.keys();
    auto info = detail::read_inspect(client.eval(detail::inspect_script(), k, {}));
    info.server = client.core()->server_for_key(keys.lock.lock);
    if (client.core()->cluster()) info.slot = detail::key_slot(keys.lock.lock);
    return info;
}

bool wait_until_free(Client& client, std::string_view name, std::chrono::steady_clock::time_point deadline,
                     std::stop_token stop) {
    validate_name(name);
    std::mutex mutex;
    detail::Condition changed;
    bool news = false;
    auto heard = [&](Subscription::Event, std::string_view) {
        std::lock_guard lock(mutex);
        news = true;
        changed.notify_all();
    };
    // A Lock's and an RwLock's releases come on the lock's channel, a
    // semaphore's on its own.
    auto subscription = client.subscribe(std::string(detail::LockKeys(name).channel()), heard);
    auto semaphore_subscription = client.subscribe(detail::SemaphoreKeys(name).channel(), heard);
    // Subscribed before the first look, so a release between the two is heard.
    const auto confirm_by = std::min(deadline, std::chrono::steady_clock::now() + client.options().command_timeout);
    subscription.wait_active(confirm_by);
    semaphore_subscription.wait_active(confirm_by);
    const InspectKeys keys(name);
    const auto k = keys.keys();
    for (;;) {
        // Every hold that stands is marked, so that its release publishes (a release publishes
        // only when someone waited), and the name is looked at in the same atomic step: no hold
        // comes in between. The semaphore's mark lasts as long as this wait may (a day at most,
        // the longest lease, which bounds each sleep below).
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        const auto wait_ms = std::to_string(std::clamp<long long>(left.count(), 1, max_lease.count()));
        std::string_view args[] = {wait_ms};
        const auto reply = client.eval(detail::mark_waited_script(), k, args);
        if (!reply.is_array() || reply.elements.size() != 2)
            throw Error(errc::protocol_error, "unexpected answer to the marks of wait_until_free on " + std::string(name));
        const LockInfo info = detail::read_inspect(reply.elements[1]);
        if (!info.held) return true;
        // Also when a lease ends without a release (a holder that died).
        auto first_end = info.owner.empty() ? std::chrono::milliseconds::max() : info.ttl;
        for (const auto& reader : info.readers) first_end = std::min(first_end, reader.ttl);
        for (const auto& permit : info.semaphore.holders) first_end = std::min(first_end, permit.ttl);
        const auto lease_end = std::chrono::steady_clock::now() + first_end + std::chrono::milliseconds(1);
        std::unique_lock lock(mutex);
        if (!changed.wait_until(lock, stop, std::min(deadline, lease_end), [&] { return news; }) &&
            (stop.stop_requested() || std::chrono::steady_clock::now() >= deadline))
            return false;
        news = false;
    }
}

std::vector<std::pair<std::string, LockInfo>> list_locks(Client& client, std::string_view pattern) {
    if (pattern.empty()) throw Error(errc::invalid_argument, "the pattern is empty");
    const detail::LockKeys shape(pattern);
    const detail::SemaphoreKeys semaphore_shape(pattern);
    // The key that makes each kind held: "dlock:{NAME}" (a Lock, an RwLock's
    // writer), "dlock:{NAME}:readers", "dlock:sem:{NAME}" (permits).
    struct Shape {
        std::string_view match, prefix, suffix, type;
    };
    const Shape shapes[] = {{shape.lock, "dlock:{", "}", "hash"},
                            {shape.readers(), "dlock:{", "}:readers", "zset"},
                            {semaphore_shape.permits, "dlock:sem:{", "}", "zset"}};
    std::vector<std::pair<std::string, LockInfo>> locks;
    // A cluster's keyspace is the union of its masters'.
    auto masters = client.core()->cluster_masters();
    if (masters.empty()) masters.emplace_back();
    for (const auto& master : masters) {
        for (const auto& kind : shapes) {
            std::string cursor = "0";
            do {
                std::string_view scan[] = {"SCAN", cursor, "MATCH", kind.match, "COUNT", scan_count, "TYPE", kind.type};
                std::error_code ec;
                Reply page = client.core()->call_on(master, scan, ec);
                if (ec) throw Error(ec, page.is_error() ? page.text : "SCAN on " + master.to_string());
                if (!page.is_array() || page.elements.size() != 2 || !page.elements[1].is_array())
                    throw Error(errc::protocol_error, "unexpected SCAN reply");
                cursor = page.elements[0].text;
                std::vector<std::string> names;
                for (const auto& key : page.elements[1].elements) {
                    // A glob may also match other keys of that shape whose
                    // name is not a valid lock name.
                    const std::string_view k = key.text;
                    if (k.size() <= kind.prefix.size() + kind.suffix.size() || !k.starts_with(kind.prefix) ||
                        !k.ends_with(kind.suffix))
                        continue;
                    auto name = detail::name_of_tag(
                        k.substr(kind.prefix.size(), k.size() - kind.prefix.size() - kind.suffix.size()));
                    if (!name || name->empty() || name->size() > max_lock_name_bytes) continue;
                    names.push_back(std::move(*name));
                }
                if (!names.empty()) inspect_batch(client, std::move(names), locks);
            } while (cursor != "0");
        }
    }
    // SCAN may return a key twice (a rehash during the walk), and an RwLock
    // with a writer and readers is found by two shapes.
    std::sort(locks.begin(), locks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    locks.erase(std::unique(locks.begin(), locks.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
                locks.end());
    return locks;
}

ForceRelease force_release(Client& client, std::string_view name, const ForceReleaseOptions& options) {
    validate_name(name);
    const std::string_view mode = options.all ? "all" : options.holder.empty() ? "one" : "holder";
    const detail::LockKeys keys(name);
    const auto reader_state = keys.reader_state();
    std::string_view k[] = {keys.lock,   keys.channel(), keys.fence(), keys.line(),
                            keys.places(), keys.readers(), reader_state};
    // The first waiter in line is granted the lock, for the default
    // waiter_lease until it confirms; the fence is kept as a release keeps it.
    const LockOptions defaults;
    const auto grant_ms = std::to_string(defaults.waiter_lease.count()),
               retention_ms = std::to_string(defaults.retention.count());
    std::string_view a[] = {grant_ms, retention_ms, mode, options.holder};
    auto answer = detail::read_force_release(client.eval(detail::force_release_script(), k, a));
    if (!answer.broken.empty() || answer.refused) return answer;
    // One name is one kind: nothing of a lock's, so perhaps a semaphore's.
    const detail::SemaphoreKeys semaphore(name);
    std::string_view sk[] = {semaphore.all[0], semaphore.all[1], semaphore.all[2],
                             semaphore.all[3], semaphore.all[4], semaphore.all[5]};
    const auto semaphore_retention = std::to_string(default_semaphore_retention.count());
    std::string_view sa[] = {semaphore_retention, mode, options.holder};
    return detail::read_force_release(client.eval(detail::semaphore_force_release_script(), sk, sa));
}

std::optional<std::string> force_release(Client& client, std::string_view name) {
    auto answer = force_release(client, name, ForceReleaseOptions{});
    if (answer.refused) {
        std::string holders;
        for (const auto& hold : answer.would_break) holders += (holders.empty() ? "" : ", ") + hold.holder;
        throw Error(errc::invalid_argument, std::string(name) + " has " + std::to_string(answer.would_break.size()) +
                                                " holds (" + holders +
                                                "); break them all (ForceReleaseOptions::all) or name one holder");
    }
    if (answer.broken.empty()) return std::nullopt;
    return answer.broken.front().holder;
}

}  // namespace dlock
