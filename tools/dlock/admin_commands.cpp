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

const char* kind_name(LockInfo::Kind kind) {
    switch (kind) {
        case LockInfo::Kind::exclusive: return "exclusive";
        case LockInfo::Kind::shared: return "shared";
        case LockInfo::Kind::semaphore: return "semaphore";
        case LockInfo::Kind::free: break;
    }
    return "free";
}

std::string plural(std::size_t n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// The holder label's parts ("host=NAME pid=N thread=N", as the library
// writes it) as JSON fields: holder_host, holder_pid, holder_thread (null
// when absent or not a number), beside the label itself in "holder".
std::string holder_fields(bool exclusive, const std::string& label) {
    std::map<std::string, std::string> parts;
    for (std::size_t at = 0; exclusive && at < label.size();) {
        auto end = label.find(' ', at);
        if (end == std::string::npos) end = label.size();
        const auto word = label.substr(at, end - at);
        if (const auto eq = word.find('='); eq != std::string::npos) parts[word.substr(0, eq)] = word.substr(eq + 1);
        at = end + 1;
    }
    auto number = [&](const std::string& name) {
        const auto found = parts.find(name);
        if (found == parts.end() || found->second.empty() ||
            found->second.find_first_not_of("0123456789") != std::string::npos || found->second.size() > 19)
            return std::string("null");
        return found->second;
    };
    const auto host = parts.find("host");
    return ", \"holder_host\": " + (host != parts.end() ? json_string(host->second) : std::string("null")) +
           ", \"holder_pid\": " + number("pid") + ", \"holder_thread\": " + number("thread");
}

// The fields of one server's view of the name, for a JSON object: the
// exclusive hold's fields first (as before there were other kinds), then
// the kind and every holder.
std::string json_fields(const LockInfo& info) {
    const bool exclusive = !info.owner.empty();
    std::string holders;
    auto add = [&holders](std::string holder) { holders += (holders.empty() ? "" : ", ") + std::move(holder); };
    if (exclusive)
        add("{\"owner\": " + json_string(info.owner) + ", \"hold_count\": " + std::to_string(info.hold_count) +
            ", \"ttl_ms\": " + std::to_string(info.ttl.count()) + ", \"side\": \"exclusive\"}");
    for (const auto& reader : info.readers)
        add("{\"owner\": " + json_string(reader.owner) + ", \"hold_count\": " + std::to_string(reader.hold_count) +
            ", \"ttl_ms\": " + std::to_string(reader.ttl.count()) + ", \"side\": \"reader\"}");
    for (const auto& permit : info.semaphore.holders)
        add("{\"permit\": " + json_string(permit.permit) + ", \"count\": " + std::to_string(permit.count) +
            ", \"ttl_ms\": " + std::to_string(permit.ttl.count()) + ", \"side\": \"permit\"}");
    std::string fields = "\"held\": " + std::string(info.held ? "true" : "false") +
                         ", \"owner\": " + (exclusive ? json_string(info.owner) : "null") +
                         ", \"holder\": " + (exclusive ? json_string(describe_owner(info)) : "null") +
                         holder_fields(exclusive, info.holder) +
                         ", \"hold_count\": " + or_null(exclusive, info.hold_count) +
                         ", \"ttl_ms\": " + or_null(exclusive, info.ttl.count()) +
                         ", \"fencing_token\": " + or_null(info.last_fencing_token > 0, info.last_fencing_token) +
                         ", \"kind\": \"" + kind_name(info.kind) + "\"";
    if (info.kind == LockInfo::Kind::semaphore)
        fields += ", \"semaphore\": true, \"limit\": " + std::to_string(info.semaphore.limit) +
                  ", \"used\": " + std::to_string(info.semaphore.used);
    return fields + ", \"readers\": " + std::to_string(info.readers.size()) +
           ", \"waiting\": " + std::to_string(info.waiters + info.semaphore.waiting) + ", \"holders\": [" + holders +
           "]";
}

// The first line of a name's state, whatever the bytes of the owner: the
// label is whatever the holder wrote.
std::string describe(const LockInfo& info) {
    std::string waiting = info.waiters ? "; " + std::to_string(info.waiters) + " waiting" : std::string();
    if (!info.owner.empty())
        return "held by " + text_line(describe_owner(info)) + " (hold count " + std::to_string(info.hold_count) +
               "), lease " + std::to_string(info.ttl.count()) + " ms left, fencing token " +
               std::to_string(info.last_fencing_token) +
               (info.readers.empty() ? std::string() : ", and read by it") + waiting;
    if (!info.readers.empty())
        return "read-shared by " + plural(info.readers.size(), "reader") + ", fencing token " +
               std::to_string(info.last_fencing_token) + waiting;
    if (info.kind == LockInfo::Kind::semaphore)
        return "semaphore, " + std::to_string(info.semaphore.used) + " of " + plural(info.semaphore.limit, "permit") +
               " held, " + std::to_string(info.semaphore.waiting) + " waiting";
    if (info.last_fencing_token > 0) return "free; last fencing token " + std::to_string(info.last_fencing_token);
    return "free; never locked";
}

// One line per reader or permit under the first, whatever their bytes.
void print_holders(const LockInfo& info) {
    for (const auto& reader : info.readers)
        std::printf("  reader %s (hold count %u), lease %lld ms left\n", text_line(reader.owner).c_str(),
                    reader.hold_count, static_cast<long long>(reader.ttl.count()));
    for (const auto& h : info.semaphore.holders)
        std::printf("  %s: %u permit%s, lease %lld ms left\n", text_line(h.permit).c_str(), h.count,
                    h.count == 1 ? "" : "s", static_cast<long long>(h.ttl.count()));
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
            if (!infos.back()->owner.empty()) ++holders[infos.back()->owner];
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

int run_status(const GlobalOptions& global, const StatusOptions& options) {
    const auto& key = options.key;
    if (global.urls.size() > 1) {
        bool held = false;
        const int code = masters_status(global, key, options.json, held);
        return code == exit_ok && options.exit_status && !held ? exit_not_held : code;
    }
    std::optional<Client> slot;
    auto& client = connect(slot, global, global.urls.front());
    const LockInfo info = inspect_lock(client, key);
    // Behind Sentinel or in a cluster, which server answered (and the slot).
    const auto topology = client.address().topology;
    std::string where, where_json;
    if (topology != ServerAddress::Topology::standalone) {
        where = " [" + (info.slot >= 0 ? "slot " + std::to_string(info.slot) + " on " : std::string("on master ")) +
                info.server + "]";
        where_json = ", \"server\": " + json_string(info.server) +
                     (info.slot >= 0 ? ", \"slot\": " + std::to_string(info.slot) : std::string());
    }
    if (options.json) {
        std::printf("{\"key\": %s, %s%s}\n", json_string(key).c_str(), json_fields(info).c_str(), where_json.c_str());
    } else {
        std::printf("%s: %s%s\n", text_line(key).c_str(), describe(info).c_str(), where.c_str());
        print_holders(info);
    }
    return options.exit_status && !info.held ? exit_not_held : exit_ok;
}

int run_list(const GlobalOptions& global, const std::string& pattern, bool json) {
    if (global.urls.size() > 1) {
        complain("dlock list reads one server; give it one URL (each master's locks are its own)");
        return exit_usage;
    }
    std::optional<Client> slot;
    auto& client = connect(slot, global, global.urls.front());
    for (const auto& [name, info] : list_locks(client, pattern)) {
        if (json) {
            std::printf("{\"key\": %s, %s}\n", json_string(name).c_str(), json_fields(info).c_str());
        } else {
            std::printf("%s: %s\n", text_line(name).c_str(), describe(info).c_str());
            print_holders(info);
        }
    }
    return exit_ok;
}

namespace {

std::string describe_hold(const ForceRelease::Broken& hold) {
    switch (hold.kind) {
        case LockInfo::Kind::shared: return "reader " + text_line(hold.holder) + " (hold count " + std::to_string(hold.count) + ")";
        case LockInfo::Kind::semaphore: return "permit " + text_line(hold.holder) + " (" + plural(hold.count, "permit") + ")";
        default: return text_line(hold.holder);
    }
}

std::string describe_holds(const std::vector<ForceRelease::Broken>& holds) {
    std::string text;
    for (const auto& hold : holds) text += (text.empty() ? "" : ", ") + describe_hold(hold);
    return text;
}

}  // namespace

int run_release(const GlobalOptions& global, const ReleaseOptions& options) {
    const auto& key = options.key;
    if (!options.force) {
        complain("release breaks a lock someone else holds; say --force to do it");
        return exit_usage;
    }
    Servers servers(global);
    const ForceReleaseOptions what{.all = options.all, .holder = options.holder};
    // On every master: a Redlock holder keeps the lock while a majority has it.
    bool released = false;
    std::error_code failure;
    for (auto* server : servers.all) {
        try {
            const auto answer = force_release(*server, key, what);
            if (answer.refused) {
                // Nothing was broken: say what would be, and how to ask for it.
                complain(text_line(key) + " has " + plural(answer.would_break.size(), "hold") + " (" +
                         describe_holds(answer.would_break) +
                         "); break them all with --all, or one with --holder OWNER");
                return exit_usage;
            }
            if (answer.broken.empty()) continue;
            released = true;
            std::printf("released %s on %s, held by %s\n", text_line(key).c_str(),
                        server->address().to_string().c_str(), describe_holds(answer.broken).c_str());
        } catch (const Error& e) {
            if (servers.all.size() == 1) throw;
            complain(about_master(*server, e.what()));
            failure = e.code();
        }
    }
    if (released) return exit_ok;
    if (failure) return exit_code_for(failure);
    if (!global.quiet) {
        if (options.holder.empty()) std::printf("%s was not held\n", text_line(key).c_str());
        else std::printf("%s was not held by %s\n", text_line(key).c_str(), text_line(options.holder).c_str());
    }
    return exit_not_held;
}

}  // namespace dlock::cli
