// dlock status / dlock list / dlock release --force: look at locks, break one.
#include <cstdio>
#include <map>
#include <optional>

#include "cli.hpp"
#include "dlock/error.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/server_address.hpp"
#include "json.hpp"

namespace dlock::cli {
namespace {

std::string or_null(bool present, auto value) { return present ? std::to_string(value) : std::string("null"); }

// The fields of one server's view of the lock, for a JSON object.
std::string json_fields(const LockInfo& info) {
    return "\"held\": " + std::string(info.held ? "true" : "false") +
           ", \"owner\": " + (info.held ? json_string(info.owner) : "null") +
           ", \"holder\": " + (info.held ? json_string(describe_owner(info)) : "null") +
           ", \"hold_count\": " + or_null(info.held, info.hold_count) +
           ", \"ttl_ms\": " + or_null(info.held, info.ttl.count()) +
           ", \"fencing_token\": " + or_null(info.last_fencing_token > 0, info.last_fencing_token);
}

// One line whatever the owner's bytes: the label is whatever the holder wrote.
std::string describe(const LockInfo& info) {
    if (info.held)
        return "held by " + text_line(describe_owner(info)) + " (hold count " + std::to_string(info.hold_count) +
               "), lease " + std::to_string(info.ttl.count()) + " ms left, fencing token " +
               std::to_string(info.last_fencing_token);
    if (info.last_fencing_token > 0) return "free; last fencing token " + std::to_string(info.last_fencing_token);
    return "free; never locked";
}

// Every master's view, and who (if anyone) holds it on a majority.
// A master's URL as it may be shown: its password (which may have come from
// a file or the environment) replaced by "***".
std::string shown_url(const std::string& url) {
    std::error_code ec;
    auto address = dlock::ServerAddress::parse(url, ec);
    return ec ? std::string("(an invalid URL)") : address.to_string();
}

int masters_status(const GlobalOptions& global, const std::string& key, bool json, bool& held) {
    Masters masters(global.urls, client_options(global));
    std::vector<std::optional<LockInfo>> infos;
    std::vector<std::string> errors;
    std::map<std::string, std::size_t> holders;
    std::size_t answered = 0;
    for (std::size_t i = 0; i < masters.size(); ++i) {
        try {
            infos.push_back(inspect_lock(masters.client(i), key));
            errors.emplace_back();
            ++answered;
            if (infos.back()->held) ++holders[infos.back()->owner];
        } catch (const Error& e) {
            infos.emplace_back();
            errors.push_back(e.what());
        }
    }
    std::string majority_owner;
    for (const auto& [owner, count] : holders)
        if (count >= masters.quorum()) majority_owner = owner;
    held = !majority_owner.empty();
    if (json) {
        std::string out = "{\"key\": " + json_string(key) + ", \"held\": " +
                          (majority_owner.empty() ? "false" : "true") + ", \"owner\": " +
                          (majority_owner.empty() ? "null" : json_string(majority_owner)) + ", \"masters\": [";
        for (std::size_t i = 0; i < masters.size(); ++i) {
            if (i) out += ", ";
            out += "{\"url\": " + json_string(shown_url(global.urls[i])) + ", ";
            out += infos[i] ? json_fields(*infos[i]) + ", \"error\": null" : "\"error\": " + json_string(errors[i]);
            out += "}";
        }
        std::printf("%s]}\n", out.c_str());
    } else {
        if (!majority_owner.empty())
            std::printf("%s: held by %s on %zu of %zu masters\n", text_line(key).c_str(),
                        text_line(majority_owner).c_str(), holders[majority_owner], masters.size());
        else
            std::printf("%s: not held by any majority of the %zu masters\n", text_line(key).c_str(), masters.size());
        for (std::size_t i = 0; i < masters.size(); ++i)
            std::printf("  %s\n", about_master(masters.client(i), infos[i] ? describe(*infos[i])
                                                                           : "unreachable: " + errors[i])
                                      .c_str());
    }
    if (answered >= masters.quorum()) return exit_ok;
    complain("only " + std::to_string(answered) + " of " + std::to_string(masters.size()) + " masters answered");
    return exit_unavailable;
}

}  // namespace

namespace {

void print_semaphore(const std::string& key, const SemaphoreInfo& info, bool json) {
    if (json) {
        std::string holders;
        for (const auto& h : info.holders) {
            if (!holders.empty()) holders += ", ";
            holders += "{\"permit\": " + json_string(h.permit) + ", \"count\": " + std::to_string(h.count) +
                       ", \"ttl_ms\": " + std::to_string(h.ttl.count()) + "}";
        }
        std::printf("{\"key\": %s, \"semaphore\": true, \"limit\": %u, \"used\": %u, \"waiting\": %u, "
                    "\"holders\": [%s]}\n",
                    json_string(key).c_str(), info.limit, info.used, info.waiting, holders.c_str());
        return;
    }
    // One line per holder whatever the bytes of the name or a permit's id.
    std::printf("%s: semaphore, %u of %u permits held, %u waiting\n", text_line(key).c_str(), info.used, info.limit,
                info.waiting);
    for (const auto& h : info.holders)
        std::printf("  %s: %u permit%s, lease %lld ms left\n", text_line(h.permit).c_str(), h.count,
                    h.count == 1 ? "" : "s", static_cast<long long>(h.ttl.count()));
}

}  // namespace

int run_status(const GlobalOptions& global, const StatusOptions& options) {
    const auto& key = options.key;
    if (global.urls.size() > 1) {
        bool held = false;
        const int code = masters_status(global, key, options.json, held);
        return code == exit_ok && options.exit_status && !held ? exit_not_held : code;
    }
    std::optional<Client> slot;
    auto& client = connect(slot, global, global.urls.front());
    LockInfo info = inspect_lock(client, key);
    // A semaphore of that name is shown too: its limit and its holders.
    const auto semaphore = inspect_semaphore(client, key);
    const bool is_semaphore = semaphore.limit > 0 && !info.held;
    // Behind Sentinel or in a cluster, which server answered (and the slot).
    const auto topology = client.address().topology;
    std::string where, where_json;
    if (topology != ServerAddress::Topology::standalone) {
        where = " [" + (info.slot >= 0 ? "slot " + std::to_string(info.slot) + " on " : std::string("on master ")) +
                info.server + "]";
        where_json = ", \"server\": " + json_string(info.server) +
                     (info.slot >= 0 ? ", \"slot\": " + std::to_string(info.slot) : std::string());
    }
    if (is_semaphore) print_semaphore(key, semaphore, options.json);
    else if (options.json)
        std::printf("{\"key\": %s, %s%s}\n", json_string(key).c_str(), json_fields(info).c_str(), where_json.c_str());
    else std::printf("%s: %s%s\n", text_line(key).c_str(), describe(info).c_str(), where.c_str());
    const bool held = is_semaphore ? semaphore.used > 0 : info.held;
    return options.exit_status && !held ? exit_not_held : exit_ok;
}

int run_list(const GlobalOptions& global, const std::string& pattern, bool json) {
    if (global.urls.size() > 1) {
        complain("dlock list reads one server; give it one URL (each master's locks are its own)");
        return exit_usage;
    }
    std::optional<Client> slot;
    auto& client = connect(slot, global, global.urls.front());
    for (const auto& [name, info] : list_locks(client, pattern)) {
        if (json) std::printf("{\"key\": %s, %s}\n", json_string(name).c_str(), json_fields(info).c_str());
        else std::printf("%s: %s\n", text_line(name).c_str(), describe(info).c_str());
    }
    return exit_ok;
}

int run_release(const GlobalOptions& global, const std::string& key, bool force) {
    if (!force) {
        complain("release breaks a lock someone else holds; say --force to do it");
        return exit_usage;
    }
    Servers servers(global);
    // On every master: a Redlock holder keeps the lock while a majority has it.
    bool released = false;
    std::error_code failure;
    for (auto* server : servers.all) {
        try {
            auto previous = force_release(*server, key);
            if (!previous) continue;
            released = true;
            std::printf("released %s on %s, held by %s\n", text_line(key).c_str(),
                        server->address().to_string().c_str(), text_line(*previous).c_str());
        } catch (const Error& e) {
            if (servers.all.size() == 1) throw;
            complain(about_master(*server, e.what()));
            failure = e.code();
        }
    }
    if (released) return exit_ok;
    if (failure) return exit_code_for(failure);
    if (!global.quiet) std::printf("%s was not held\n", text_line(key).c_str());
    return exit_not_held;
}

}  // namespace dlock::cli
