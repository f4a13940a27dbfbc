// dlock status / dlock release --force: look at a lock, break a lock.
#include <cstdio>
#include <map>
#include <optional>

#include "cli.hpp"
#include "dlock/error.hpp"

namespace dlock::cli {
namespace {

std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
            out += escaped;
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    return out + "\"";
}

std::string or_null(bool present, auto value) { return present ? std::to_string(value) : std::string("null"); }

// The fields of one server's view of the lock, for a JSON object.
std::string json_fields(const LockInfo& info) {
    return "\"held\": " + std::string(info.held ? "true" : "false") +
           ", \"owner\": " + (info.held ? json_string(info.owner) : "null") +
           ", \"hold_count\": " + or_null(info.held, info.hold_count) +
           ", \"ttl_ms\": " + or_null(info.held, info.ttl.count()) +
           ", \"fencing_token\": " + or_null(info.last_fencing_token > 0, info.last_fencing_token);
}

std::string describe(const LockInfo& info) {
    if (info.held)
        return "held by " + info.owner + " (hold count " + std::to_string(info.hold_count) + "), lease " +
               std::to_string(info.ttl.count()) + " ms left, fencing token " +
               std::to_string(info.last_fencing_token);
    if (info.last_fencing_token > 0) return "free; last fencing token " + std::to_string(info.last_fencing_token);
    return "free; never locked";
}

// Every master's view, and who (if anyone) holds it on a majority.
int masters_status(const GlobalOptions& global, const std::string& key, bool json) {
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
    if (json) {
        std::string out = "{\"key\": " + json_string(key) + ", \"held\": " +
                          (majority_owner.empty() ? "false" : "true") + ", \"owner\": " +
                          (majority_owner.empty() ? "null" : json_string(majority_owner)) + ", \"masters\": [";
        for (std::size_t i = 0; i < masters.size(); ++i) {
            if (i) out += ", ";
            out += "{\"url\": " + json_string(global.urls[i]) + ", ";
            out += infos[i] ? json_fields(*infos[i]) + ", \"error\": null" : "\"error\": " + json_string(errors[i]);
            out += "}";
        }
        std::printf("%s]}\n", out.c_str());
    } else {
        if (!majority_owner.empty())
            std::printf("%s: held by %s on %zu of %zu masters\n", key.c_str(), majority_owner.c_str(),
                        holders[majority_owner], masters.size());
        else
            std::printf("%s: not held by any majority of the %zu masters\n", key.c_str(), masters.size());
        for (std::size_t i = 0; i < masters.size(); ++i)
            std::printf("  %s: %s\n", global.urls[i].c_str(),
                        infos[i] ? describe(*infos[i]).c_str() : ("unreachable: " + errors[i]).c_str());
    }
    if (answered >= masters.quorum()) return exit_ok;
    complain("only " + std::to_string(answered) + " of " + std::to_string(masters.size()) + " masters answered");
    return exit_unavailable;
}

}  // namespace

int run_status(const GlobalOptions& global, const std::string& key, bool json) {
    if (global.urls.size() > 1) return masters_status(global, key, json);
    Client client(global.urls.front(), client_options(global));
    LockInfo info = inspect_lock(client, key);
    if (json) std::printf("{\"key\": %s, %s}\n", json_string(key).c_str(), json_fields(info).c_str());
    else std::printf("%s: %s\n", key.c_str(), describe(info).c_str());
    return exit_ok;
}

int run_release(const GlobalOptions& global, const std::string& key, bool force) {
    if (!force) {
        complain("release breaks a lock someone else holds; say --force to do it");
        return exit_usage;
    }
    std::optional<Masters> masters;
    std::optional<Client> single;
    std::vector<Client*> servers;
    if (global.urls.size() > 1) {
        masters.emplace(global.urls, client_options(global));
        for (std::size_t i = 0; i < masters->size(); ++i) servers.push_back(&masters->client(i));
    } else {
        servers.push_back(&single.emplace(global.urls.front(), client_options(global)));
    }
    // On every master: a Redlock holder keeps the lock while a majority has it.
    bool released = false;
    std::error_code failure;
    for (auto* server : servers) {
        try {
            auto previous = force_release(*server, key);
            if (!previous) continue;
            released = true;
            std::printf("released %s on %s, held by %s\n", key.c_str(), server->address().to_string().c_str(),
                        previous->c_str());
        } catch (const Error& e) {
            if (servers.size() == 1) throw;
            complain(server->address().to_string() + ": " + e.what());
            failure = e.code();
        }
    }
    if (released) return exit_ok;
    if (failure) return exit_code_for(failure);
    if (!global.quiet) std::printf("%s was not held\n", key.c_str());
    return exit_not_held;
}

}  // namespace dlock::cli
