// Operator tools: look at a lock, break a lock.
#include <algorithm>
#include <condition_variable>

#include "async/condition.hpp"
#include <mutex>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "lock_keys.hpp"
#include "redis/client_core.hpp"
#include "redis/cluster_slots.hpp"
#include "lock_scripts.hpp"
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

// Inspects names in one pipelined batch; waits for every answer.
void inspect_batch(Client& client, std::vector<std::string> names, std::vector<std::pair<std::string, LockInfo>>& out) {
    std::mutex mutex;
    detail::Condition done;
    std::size_t pending = names.size();
    std::vector<Reply> replies(names.size());
    std::error_code failure;
    for (std::size_t i = 0; i < names.size(); ++i) {
        detail::LockKeys keys(names[i]);
        const auto fence = keys.fence();
        std::string_view k[] = {keys.lock, fence};
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
    detail::LockKeys keys(name);
    const auto fence = keys.fence();
    std::string_view k[] = {keys.lock, fence};
    auto info = detail::read_inspect(client.eval(detail::inspect_script(), k, {}));
    info.server = client.core()->server_for_key(keys.lock);
    if (client.core()->cluster()) info.slot = detail::key_slot(keys.lock);
    return info;
}

bool wait_until_free(Client& client, std::string_view name, std::chrono::steady_clock::time_point deadline,
                     std::stop_token stop) {
    validate_name(name);
    std::mutex mutex;
    detail::Condition changed;
    bool news = false;
    auto subscription = client.subscribe(detail::LockKeys(name).channel(), [&](Subscription::Event, std::string_view) {
        std::lock_guard lock(mutex);
        news = true;
        changed.notify_all();
    });
    // Subscribed before the first look, so a release between the two is heard.
    subscription.wait_active(std::min(deadline, std::chrono::steady_clock::now() + client.options().command_timeout));
    for (;;) {
        const LockInfo info = inspect_lock(client, name);
        if (!info.held) return true;
        // Also when the lease ends without a release (a holder that died).
        const auto lease_end = std::chrono::steady_clock::now() + info.ttl + std::chrono::milliseconds(1);
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
    const std::string prefix = "dlock:{";
    std::vector<std::pair<std::string, LockInfo>> locks;
    // A cluster's keyspace is the union of its masters'.
    auto masters = client.core()->cluster_masters();
    if (masters.empty()) masters.emplace_back();
    for (const auto& master : masters) {
        std::string cursor = "0";
        do {
            std::string_view scan[] = {"SCAN", cursor, "MATCH", shape.lock, "COUNT", scan_count, "TYPE", "hash"};
            std::error_code ec;
            Reply page = client.core()->call_on(master, scan, ec);
            if (ec) throw Error(ec, page.is_error() ? page.text : "SCAN on " + master.to_string());
            if (!page.is_array() || page.elements.size() != 2 || !page.elements[1].is_array())
                throw Error(errc::protocol_error, "unexpected SCAN reply");
            cursor = page.elements[0].text;
            std::vector<std::string> names;
            for (const auto& key : page.elements[1].elements) {
                // The lock hash is "dlock:{NAME}"; a glob may also match other
                // keys of that shape whose name is not a valid lock name.
                const auto& k = key.text;
                if (k.size() <= prefix.size() + 1 || k.back() != '}') continue;
                auto name = detail::name_of_tag(std::string_view(k).substr(prefix.size(), k.size() - prefix.size() - 1));
                if (!name || name->empty() || name->size() > max_lock_name_bytes) continue;
                names.push_back(std::move(*name));
            }
            if (!names.empty()) inspect_batch(client, std::move(names), locks);
        } while (cursor != "0");
    }
    // SCAN may return a key twice (a rehash during the walk).
    std::sort(locks.begin(), locks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    locks.erase(std::unique(locks.begin(), locks.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
                locks.end());
    return locks;
}

std::optional<std::string> force_release(Client& client, std::string_view name) {
    validate_name(name);
    detail::LockKeys keys(name);
    const auto channel = keys.channel(), fence = keys.fence(), line = keys.line(), places = keys.places();
    std::string_view k[] = {keys.lock, channel, fence, line, places};
    // The first waiter in line is granted the lock, for the default
    // waiter_lease until it confirms; the fence is kept as a release keeps it.
    const LockOptions defaults;
    const auto grant_ms = std::to_string(defaults.waiter_lease.count()),
               retention_ms = std::to_string(defaults.retention.count());
    std::string_view a[] = {grant_ms, retention_ms};
    return detail::read_force_release(client.eval(detail::force_release_script(), k, a));
}

}  // namespace dlock
