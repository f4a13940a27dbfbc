#include "cli.hpp"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "dlock/error.hpp"
#include "event_log.hpp"
#include "json.hpp"

namespace dlock::cli {

ClientOptions client_options(const GlobalOptions& global) {
    ClientOptions options;
    options.connect_timeout = global.connect_timeout;
    // A command line tool should not wait longer for one reply than for a connection.
    options.command_timeout = std::max(global.connect_timeout, std::chrono::milliseconds(1000));
    options.client_name = "dlock-cli";
    options.tls.ca_file = global.tls_ca;
    options.tls.cert_file = global.tls_cert;
    options.tls.key_file = global.tls_key;
    options.sentinel_username = global.sentinel_user;
    options.sentinel_password = global.sentinel_password;
    options.metrics = global.metrics;
    if (!global.quiet) options.on_warning = [](std::string_view message) { warn(std::string(message)); };
    return options;
}

Client& connect(std::optional<Client>& slot, const GlobalOptions& global, const std::string& url,
                std::optional<std::chrono::steady_clock::time_point> by) {
    auto& client = slot.emplace(url, client_options(global));
    std::error_code ec;
    if (by) client.wait_connected(*by + connect_grace, ec);
    if (ec == errc::connect_timeout && std::chrono::steady_clock::now() >= *by + connect_grace)
        throw Error(errc::command_timeout, client.address().to_string() +
                                               ": the server did not answer within the --wait time; not acquired");
    client.wait_connected();  // at once when connected; otherwise the reason it is not
    return client;
}

Servers::Servers(const GlobalOptions& global) {
    if (global.urls.size() > 1) {
        masters.emplace(global.urls, client_options(global));
        for (std::size_t i = 0; i < masters->size(); ++i) all.push_back(&masters->client(i));
    } else {
        all.push_back(&connect(single, global, global.urls.front()));
    }
}

int exit_code_for(const std::error_code& ec) {
    if (ec == errc::invalid_argument || ec == errc::invalid_uri) return exit_usage;
    if (ec == errc::kind_mismatch || ec == errc::limit_mismatch || ec == errc::layout_mismatch) return exit_data;
    return exit_unavailable;
}

std::string explain(const Error& e, const GlobalOptions& global) {
    std::string text = e.what();
    const auto ec = e.code();
    const bool reaching = ec == errc::connection_refused || ec == errc::connect_timeout ||
                          ec == errc::resolve_failed || ec == errc::not_connected || ec == errc::auth_failed ||
                          ec == errc::tls_error;
    if (!reaching) return text;
    if (global.urls.size() == 1) {
        std::error_code parse_error;
        const auto address = ServerAddress::parse(global.urls.front(), parse_error);
        if (!parse_error && text.find(address.to_string()) == std::string::npos)
            text = address.to_string() + ": " + text;
    }
    if (ec == errc::connection_refused)
        return text + "; is redis-server running there? Name the server with --url or $DLOCK_URL";
    if (ec == errc::connect_timeout || ec == errc::not_connected)
        return text + "; check that the host and port are right and reachable, or allow longer with "
                      "--connect-timeout";
    if (ec == errc::resolve_failed) return text + "; check the host name in --url or $DLOCK_URL";
    if (ec == errc::tls_error) return text + "; check the URL's scheme (rediss:// for TLS) and --tls-ca";
    if (text.find("none was given") != std::string::npos)
        return text + "; give it with --password-file FILE or $DLOCK_PASSWORD (and --user NAME for an ACL user)";
    return text + "; check --password-file or $DLOCK_PASSWORD (and --user)";
}

void complain(const std::string& message) {
    if (const auto* log = messages_log()) log->emit("error", "\"error\": " + json_string(message));
    else std::fprintf(stderr, "dlock: %s\n", message.c_str());
}

void warn(const std::string& message) {
    if (const auto* log = messages_log()) log->emit("warning", "\"warning\": " + json_string(message));
    else std::fprintf(stderr, "dlock: warning: %s\n", message.c_str());
}

namespace {

// A comma ends a URL only when a scheme follows it: inside one URL, commas
// separate the hosts of a Sentinel or Cluster address
// (redis-sentinel://a:26379,b:26379#m).
std::size_t next_url_comma(const std::string& item, std::size_t from) {
    for (auto comma = item.find(',', from); comma != std::string::npos; comma = item.find(',', comma + 1)) {
        auto end = comma + 1;
        while (end < item.size() && (std::isalnum(static_cast<unsigned char>(item[end])) || item[end] == '-'))
            ++end;
        if (end == item.size() || item.compare(end, 3, "://") == 0 || item[end] == ',') return comma;
    }
    return std::string::npos;
}

}  // namespace

std::vector<std::string> split_urls(const std::vector<std::string>& given) {
    std::vector<std::string> urls;
    for (const auto& item : given) {
        std::size_t start = 0;
        while (start <= item.size()) {
            auto comma = next_url_comma(item, start);
            if (comma == std::string::npos) comma = item.size();
            if (comma == start)
                throw UsageError(item.empty() ? "the URL is empty (an unset variable?)"
                                              : "an empty URL in the list '" + item + "'");
            urls.push_back(item.substr(start, comma - start));
            start = comma + 1;
        }
    }
    return urls;
}

namespace {

// RFC 3986 userinfo: everything but unreserved characters is percent-encoded.
std::string percent_encoded(std::string_view text) {
    std::string out;
    for (unsigned char c : text) {
        if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            char hex[4];
            std::snprintf(hex, sizeof hex, "%%%02X", c);
            out += hex;
        }
    }
    return out;
}

std::string password_from_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw UsageError("cannot read the password file " + path + ": " + std::strerror(errno));
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) throw UsageError("the password file " + path + " starts with an empty line");
    return line;
}

}  // namespace

void apply_credentials(std::vector<std::string>& urls, const Credentials& given) {
    Credentials credentials = given;
    if (const char* user = std::getenv("DLOCK_USER"); credentials.user.empty() && user) credentials.user = user;
    std::string password;
    if (!credentials.password_file.empty()) {
        password = password_from_file(credentials.password_file);
    } else {
        for (const char* variable : {"DLOCK_PASSWORD", "REDISCLI_AUTH"})
            if (const char* value = std::getenv(variable); value && *value) {
                password = value;
                break;
            }
    }
    if (password.empty()) {
        if (!credentials.user.empty()) throw UsageError("--user needs a password (--password-file, $DLOCK_PASSWORD)");
        return;
    }
    const std::string userinfo = percent_encoded(credentials.user) + ":" + percent_encoded(password) + "@";
    for (auto& url : urls) {
        const auto scheme_end = url.find("://");
        if (scheme_end == std::string::npos) continue;  // the parser names the mistake
        const auto authority = scheme_end + 3;
        // unix:///path has an empty authority; redis://host/db ends it at the first '/'.
        const auto authority_end = url.find('/', authority);
        const auto at = url.find('@', authority);
        if (at != std::string::npos && (authority_end == std::string::npos || at < authority_end)) continue;
        url.insert(authority, userinfo);
    }
}

void apply_sentinel_credentials(GlobalOptions& global, const Credentials& given) {
    global.sentinel_user = given.sentinel_user;
    if (!given.sentinel_password_file.empty())
        global.sentinel_password = password_from_file(given.sentinel_password_file);
    else if (const char* value = std::getenv("DLOCK_SENTINEL_PASSWORD"); value && *value)
        global.sentinel_password = value;
    if (!global.sentinel_user.empty() && global.sentinel_password.empty())
        throw UsageError("--sentinel-user needs a password (--sentinel-password-file, $DLOCK_SENTINEL_PASSWORD)");
}

std::string describe_owner(const LockInfo& info) {
    return info.holder.empty() ? info.owner : info.holder + " owner=" + info.owner;
}

std::string about_master(const Client& master, const std::string& text) {
    const auto address = master.address().to_string();
    std::string rest = text;
    // "ADDRESS: reason" inside (a connect error) moves to the front.
    if (const auto at = rest.find(address + ": "); at != std::string::npos) rest.erase(at, address.size() + 2);
    return rest.find(address) != std::string::npos ? rest : address + ": " + rest;
}

bool enough_masters_reachable(Masters& masters, std::optional<std::chrono::steady_clock::time_point> by) {
    std::size_t reachable = 0;
    for (std::size_t i = 0; i < masters.size(); ++i) {
        std::error_code ec;
        // The masters connect at once, side by side: one deadline for all.
        if (by) masters.client(i).wait_connected(*by + connect_grace, ec);
        else masters.client(i).wait_connected(ec);
        if (ec) complain("cannot use " + masters.client(i).address().to_string() + ": " + ec.message());
        else ++reachable;
    }
    if (reachable >= masters.quorum()) return true;
    complain("only " + std::to_string(reachable) + " of " + std::to_string(masters.size()) +
             " masters reachable; a Redlock needs " + std::to_string(masters.quorum()));
    return false;
}

}  // namespace dlock::cli
