#include "dlock/error.hpp"

#include "dlock/reply.hpp"
#include "runtime/thread_kept.hpp"
#include "server_error_text.hpp"

namespace dlock {
namespace {

class Category final : public std::error_category {
public:
    const char* name() const noexcept override { return "dlock"; }

    std::string message(int code) const override {
        switch (static_cast<errc>(code)) {
            case errc::invalid_argument: return "invalid argument";
            case errc::invalid_uri: return "invalid server URI";
            case errc::connect_timeout: return "connect timed out";
            case errc::connection_refused: return "connection refused";
            case errc::resolve_failed: return "host name does not resolve";
            case errc::tls_error: return "TLS handshake or certificate verification failed";
            case errc::auth_failed: return "authentication failed";
            case errc::not_connected: return "not connected; reconnecting";
            case errc::command_timeout: return "command timed out";
            case errc::connection_lost: return "connection lost with the command in flight (not resent)";
            case errc::protocol_error: return "protocol error";
            case errc::reply_too_large: return "reply exceeds the configured limits";
            case errc::server_error: return "server error";
            case errc::permission_denied: return "permission denied by ACL";
            case errc::wrong_type: return "key holds a value of another type";
            case errc::no_script: return "script not loaded on the server";
            case errc::client_closed: return "client closed";
            case errc::forked_child: return "client used in a forked child process; create a new Client";
            case errc::not_owner: return "the lock is not held by this owner";
            case errc::lease_lost: return "the lock's lease was lost";
            case errc::no_quorum: return "a majority of the Redlock masters did not answer in time";
            case errc::replicas_not_acknowledged: return "fewer replicas than required acknowledged the lock";
            case errc::no_master: return "no sentinel named a master";
            case errc::not_master: return "the server is not a master (a failover is under way)";
            case errc::cluster_down: return "no cluster node serves the key's slot";
            case errc::slot_migrating: return "the key's slot is being migrated (TRYAGAIN); the command did not run";
            case errc::lease_expired:
                return "the lock's lease expired: no renewal was confirmed before its validity ended";
            case errc::lock_revoked: return "the lock was revoked: force-released by an operator";
            case errc::lock_taken_over:
                return "the lock was taken over: its key is gone or another owner's (a restart, failover or deletion)";
            case errc::renewal_refused: return "the lock's renewal was refused by the server with an error";
            case errc::kind_mismatch: return "the name is held as another kind of lock";
            case errc::limit_mismatch: return "the semaphore exists with another limit";
            case errc::layout_mismatch: return "the lock's data is in a later data layout than this client's";
        }
        return "unknown dlock error";
    }
};

constexpr std::string_view lost_reason_names[] = {"expired", "revoked", "taken_over", "renewal_refused"};
constexpr errc lost_reason_codes[] = {errc::lease_expired, errc::lock_revoked, errc::lock_taken_over,
                                      errc::renewal_refused};

// The calling thread's last server error text (runtime/thread_kept.hpp:
// still there, or null, for a call made while the thread ends).
struct ServerErrorTextTag;
std::string* server_error_text() { return detail::thread_kept<std::string, ServerErrorTextTag>(); }

bool from_server(const std::error_code& ec) {
    return ec == errc::server_error || ec == errc::permission_denied || ec == errc::cluster_down ||
           ec == errc::slot_migrating || ec == errc::kind_mismatch || ec == errc::limit_mismatch ||
           ec == errc::layout_mismatch;
}

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

const std::error_category& error_category() noexcept {
    static const Category category;
    return category;
}

void throw_if(const std::error_code& ec, const std::string& detail) {
    if (!ec) return;
    std::string text = detail;
    const auto* last = server_error_text();
    if ((from_server(ec) || ec == errc::reply_too_large) && last && !last->empty())
        text += (text.empty() ? "" : ": ") + *last;
    if (text.empty()) throw Error(ec);
    throw Error(ec, text);
}

std::string last_server_error() {
    const auto* last = server_error_text();
    return last ? *last : std::string();
}

std::string_view to_string(LostReason reason) noexcept { return lost_reason_names[static_cast<std::size_t>(reason)]; }

std::error_code make_error_code(LostReason reason) noexcept {
    return make_error_code(lost_reason_codes[static_cast<std::size_t>(reason)]);
}

std::optional<LostReason> lost_reason_of(const std::error_code& ec) noexcept {
    if (ec.category() != error_category()) return std::nullopt;
    for (std::size_t i = 0; i < std::size(lost_reason_codes); ++i)
        if (ec.value() == static_cast<int>(lost_reason_codes[i])) return static_cast<LostReason>(i);
    return std::nullopt;
}

namespace detail {
void note_server_error(const std::error_code& ec, const Reply& reply) {
    // A reply refused for its size comes with the connection's word on
    // which limit and what it answered: kept as well, the caller's only clue.
    auto* last = server_error_text();
    if (!last) return;
    if (reply.is_error() && ec && (reply.error_code() == ec || ec == errc::reply_too_large)) *last = reply.text;
    else last->clear();
}
void clear_server_error() {
    if (auto* last = server_error_text()) last->clear();
}
void restore_server_error(std::string text) {
    if (auto* last = server_error_text()) *last = std::move(text);
}
}  // namespace detail

std::error_code error_code_of_server_error(std::string_view text) noexcept {
    if (starts_with(text, "WRONGTYPE")) return errc::wrong_type;
    if (starts_with(text, "NOPERM")) return errc::permission_denied;
    if (starts_with(text, "WRONGPASS") || starts_with(text, "NOAUTH") ||
        starts_with(text, "ERR invalid password") || starts_with(text, "ERR AUTH"))
        return errc::auth_failed;
    if (starts_with(text, "NOSCRIPT")) return errc::no_script;
    if (starts_with(text, "TRYAGAIN")) return errc::slot_migrating;
    if (starts_with(text, "CLUSTERDOWN")) return errc::cluster_down;
    // The scripts' own refusals (src/scripts: kind_error, semaphore_acquire.lua).
    if (starts_with(text, "DLOCK_KIND ")) return errc::kind_mismatch;
    if (starts_with(text, "DLOCK_LIMIT ")) return errc::limit_mismatch;
    if (starts_with(text, "DLOCK_LAYOUT ")) return errc::layout_mismatch;
    return errc::server_error;
}

std::error_code Reply::error_code() const noexcept {
    if (kind != Kind::error) return {};
    return error_code_of_server_error(text);
}

}  // namespace dlock
