#include "lock_session.hpp"

namespace dlock::cli {

std::string RunOptions::label() const {
    std::string text;
    for (const auto& key : keys) text += (text.empty() ? "" : ", ") + key;
    return text;
}

std::string holder_of(Client& client, const std::string& key) {
    try {
        LockInfo info = inspect_lock(client, key);
        if (!info.held) return {};
        return "held by " + describe_owner(info) + ", lease " + std::to_string(info.ttl.count()) + " ms left";
    } catch (const Error& e) {
        return std::string("cannot tell who holds it: ") + e.what();
    }
}

std::string holder_of_missing(Client& client, const MultiLock& lock) {
    for (const auto& [key, token] : lock.fencing_tokens()) {
        if (token != 0) continue;
        if (auto holder = holder_of(client, key); !holder.empty()) return key + " " + holder;
    }
    return {};
}

std::string token_fields(const Tokens& tokens) {
    if (tokens.size() == 1) return "\"fencing_token\": " + std::to_string(tokens.front().second);
    std::string fields = "\"fencing_tokens\": {";
    for (std::size_t i = 0; i < tokens.size(); ++i)
        fields += (i ? ", " : "") + json_string(tokens[i].first) + ": " + std::to_string(tokens[i].second);
    return fields + "}";
}

std::string mismatch_message(Client& client, const RunOptions& options, const std::error_code& ec,
                             const std::string& detail) {
    if (options.keys.size() != 1) return detail;
    const auto& key = options.keys.front();
    LockInfo info;
    try {
        info = inspect_lock(client, key);
    } catch (const Error&) {
        return detail;
    }
    const auto limit = info.semaphore.limit;
    const auto permits = std::to_string(limit) + (limit == 1 ? " permit" : " permits");
    if (ec == errc::limit_mismatch)
        return key + " is a semaphore with " + permits + ", not " + std::to_string(options.permits) + "; use --permits " +
               std::to_string(limit) + ", or --set-limit to change its limit";
    switch (info.kind) {
        case LockInfo::Kind::semaphore: return key + " is a semaphore with " + permits + "; use --permits or another name";
        case LockInfo::Kind::shared:
            return key + " is read-shared by " + std::to_string(info.readers.size()) +
                   (info.readers.size() == 1 ? " reader" : " readers") +
                   "; --fair, several keys and several masters do not wait for readers: take it alone, with or "
                   "without --shared, or use another name";
        case LockInfo::Kind::exclusive:
            return key + " is a lock, held by " + describe_owner(info) + "; drop --permits, or use another name";
        case LockInfo::Kind::free: break;
    }
    return detail;
}

std::string permits_of(Client& client, const std::string& key) {
    try {
        const auto info = inspect_semaphore(client, key);
        return std::to_string(info.used) + " of " + std::to_string(info.limit) + " permits held, " +
               std::to_string(info.waiting) + " waiting";
    } catch (const Error& e) {
        return std::string("cannot tell who holds its permits: ") + e.what();
    }
}

std::string loss_text(const std::error_code& reason) {
    const auto why = lost_reason_of(reason);
    if (!why) return reason.message();
    switch (*why) {
        case LostReason::expired:
            return "lease expired: no renewal was confirmed before it ran out (the server unreachable or too slow)";
        case LostReason::revoked: return "revoked by `dlock release --force` (force_release)";
        case LostReason::taken_over:
            return "taken over: its key is gone or another owner's (a server restart or failover, or the key deleted)";
        case LostReason::renewal_refused: return "the server refused its renewal with an error";
    }
    return reason.message();
}

std::string loss_fields(const std::error_code& reason) {
    const auto why = lost_reason_of(reason);
    return "\"reason\": " + json_string(why ? to_string(*why) : std::string_view("lost")) +
           ", \"message\": " + json_string(reason.message());
}

void announce_waiting(const GlobalOptions& global, const RunOptions& options, const EventLog& events,
                      const std::string& holder) {
    const bool for_people = !global.quiet && isatty(STDERR_FILENO);
    events.report("waiting", "\"holder\": " + json_string(holder),
                  for_people ? "waiting for " + options.label() + (holder.empty() ? std::string() : ", " + holder)
                             : std::string());
}

}  // namespace dlock::cli
