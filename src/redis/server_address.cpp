#include "dlock/server_address.hpp"

#include <sys/un.h>

#include <charconv>
#include <limits>
#include <vector>

#include "dlock/error.hpp"
#include "redis/address_checks.hpp"

namespace dlock {

static_assert(ServerAddress::max_socket_path == sizeof(sockaddr_un::sun_path) - 1);

namespace detail {

std::string socket_path_problem(std::string_view path) {
    if (path.size() > ServerAddress::max_socket_path)
        return "unix socket path is " + std::to_string(path.size()) + " bytes; the limit is " +
               std::to_string(ServerAddress::max_socket_path) + " (sizeof(sockaddr_un::sun_path) - 1)";
    if (path.find('\0') != std::string_view::npos) return "unix socket path holds a NUL byte";
    return {};
}

}  // namespace detail

namespace {

struct ParseError {
    std::string reason;
};

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string percent_decode(std::string_view in, std::string_view what) {
    std::string out;
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '%') {
            out.push_back(in[i]);
            continue;
        }
        if (i + 2 >= in.size()) throw ParseError{"truncated percent-encoding in " + std::string(what)};
        int hi = hex_value(in[i + 1]);
        int lo = hex_value(in[i + 2]);
        if (hi < 0 || lo < 0) throw ParseError{"bad percent-encoding in " + std::string(what)};
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
    }
    return out;
}

template <typename Int>
Int parse_number(std::string_view text, Int min, Int max, std::string_view what) {
    Int value{};
    if (text.empty()) throw ParseError{"empty " + std::string(what)};
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    const auto range = std::string(what) + " " + std::string(text) + " is out of range (" + std::to_string(min) +
                       " to " + std::to_string(max) + ")";
    // All digits but too large for the type: a number, out of range.
    if (error == std::errc::result_out_of_range && end == text.data() + text.size() && text[0] != '+' &&
        text[0] != '-')
        throw ParseError{range};
    if (error != std::errc{} || end != text.data() + text.size() || text[0] == '+' || text[0] == '-')
        throw ParseError{std::string(what) + " '" + std::string(text) + "' is not a number"};
    if (value < min || value > max) throw ParseError{range};
    return value;
}

void parse_userinfo(std::string_view userinfo, ServerAddress& out) {
    auto colon = userinfo.find(':');
    if (colon == std::string_view::npos)
        throw ParseError{"credentials need the form user:password@ or :password@"};
    out.username = percent_decode(userinfo.substr(0, colon), "user name");
    out.password = percent_decode(userinfo.substr(colon + 1), "password");
    if (out.password.empty()) throw ParseError{"empty password in credentials"};
}

bool valid_host_name(std::string_view host) {
    for (char c : host) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.' || c == '_';
        if (!ok) return false;
    }
    return true;
}

ServerAddress::Endpoint parse_host_port(std::string_view hostport, std::uint16_t default_port) {
    ServerAddress::Endpoint out{{}, default_port};
    std::string_view port_text;
    bool has_port = false;
    if (!hostport.empty() && hostport[0] == '[') {
        auto close = hostport.find(']');
        if (close == std::string_view::npos) throw ParseError{"unterminated '[' in IPv6 host"};
        out.host = std::string(hostport.substr(1, close - 1));
        if (out.host.empty()) throw ParseError{"empty IPv6 host"};
        for (char c : out.host)
            if (hex_value(c) < 0 && c != ':' && c != '.') throw ParseError{"bad character in IPv6 host"};
        auto rest = hostport.substr(close + 1);
        if (!rest.empty()) {
            if (rest[0] != ':') throw ParseError{"unexpected text after IPv6 host"};
            port_text = rest.substr(1);
            has_port = true;
        }
    } else {
        auto colon = hostport.find(':');
        if (colon != std::string_view::npos && hostport.find(':', colon + 1) != std::string_view::npos)
            throw ParseError{"IPv6 hosts must be written in brackets, as [::1]"};
        out.host = std::string(hostport.substr(0, colon));
        if (colon != std::string_view::npos) {
            port_text = hostport.substr(colon + 1);
            has_port = true;
        }
        if (out.host.empty()) throw ParseError{"missing host"};
        if (!valid_host_name(out.host)) throw ParseError{"bad character in host '" + out.host + "'"};
    }
    if (has_port) out.port = parse_number<std::uint16_t>(port_text, 1, 65535, "port");
    return out;
}

long parse_database(std::string_view text) {
    return parse_number<long>(text, 0, std::numeric_limits<int>::max(), "database");
}

void parse_unix_query(std::string_view query, ServerAddress& out) {
    while (!query.empty()) {
        auto amp = query.find('&');
        auto item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        auto eq = item.find('=');
        auto key = item.substr(0, eq);
        if (eq == std::string_view::npos) throw ParseError{"query item '" + std::string(item) + "' has no value"};
        if (key != "db") throw ParseError{"unknown query parameter '" + std::string(key) + "'"};
        out.database = parse_database(item.substr(eq + 1));
    }
}

std::string endpoint_text(const ServerAddress::Endpoint& endpoint) {
    const bool ipv6 = endpoint.host.find(':') != std::string::npos;
    return (ipv6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

// A redis:// URI names one server: "a:1,b:2" would otherwise read as one
// host with two colons, and be refused as an unbracketed IPv6 address.
// Says what the list is instead: a server named twice, or several servers
// where one is meant.
[[noreturn]] void refuse_host_list(std::string_view authority, std::uint16_t default_port) {
    std::vector<ServerAddress::Endpoint> named;
    for (std::size_t from = 0;;) {
        auto comma = authority.find(',', from);
        auto endpoint = parse_host_port(authority.substr(from, comma - from), default_port);
        for (const auto& earlier : named)
            if (earlier.host == endpoint.host && earlier.port == endpoint.port)
                throw ParseError{"the master " + endpoint_text(endpoint) +
                                 " is named twice: a redis:// URI names one server, and a master counts once"};
        named.push_back(std::move(endpoint));
        if (comma == std::string_view::npos) break;
        from = comma + 1;
    }
    throw ParseError{"a redis:// URI names one server, not the list '" + std::string(authority) +
                     "': give one URI per master (redis://" + endpoint_text(named[0]) + ",redis://" +
                     endpoint_text(named[1]) + ") for a Redlock, or redis-sentinel:// for sentinels"};
}

// [userinfo@]host[:port][/db], or with `many` a comma-separated list of
// host[:port] (the first also goes to out.host and out.port).
void parse_hosts_and_db(std::string_view rest, ServerAddress& out, std::uint16_t default_port, bool many) {
    auto slash = rest.find('/');
    auto authority = rest.substr(0, slash);
    auto at = authority.rfind('@');
    if (at != std::string_view::npos) {
        parse_userinfo(authority.substr(0, at), out);
        authority = authority.substr(at + 1);
    }
    if (!many) {
        if (authority.find(',') != std::string_view::npos) refuse_host_list(authority, default_port);
        auto endpoint = parse_host_port(authority, default_port);
        out.host = std::move(endpoint.host);
        out.port = endpoint.port;
    } else {
        while (true) {
            auto comma = authority.find(',');
            if (out.endpoints.size() == ServerAddress::max_endpoints)
                throw ParseError{"more than " + std::to_string(ServerAddress::max_endpoints) + " hosts"};
            out.endpoints.push_back(parse_host_port(authority.substr(0, comma), default_port));
            if (comma == std::string_view::npos) break;
            authority = authority.substr(comma + 1);
        }
        out.host = out.endpoints.front().host;
        out.port = out.endpoints.front().port;
    }
    if (slash != std::string_view::npos) {
        auto db = rest.substr(slash + 1);
        if (!db.empty()) out.database = parse_database(db);
    }
}

// The part after the scheme of a sentinel or cluster URI: credentials,
// endpoints separated by commas, then for a sentinel an optional /db and
// the #master-name.
void parse_group(std::string_view rest, ServerAddress& out) {
    const bool sentinel = out.topology == ServerAddress::Topology::sentinel;
    if (rest.find('?') != std::string_view::npos) throw ParseError{"query parameters are not supported"};
    auto hash = rest.find('#');
    if (sentinel) {
        if (hash == std::string_view::npos) throw ParseError{"a sentinel URI ends with #master-name"};
        out.master_name = percent_decode(rest.substr(hash + 1), "master name");
        if (out.master_name.empty()) throw ParseError{"empty master name after '#'"};
        for (unsigned char c : out.master_name)
            if (c <= ' ' || c == 0x7f) throw ParseError{"master name holds a space or control character"};
        rest = rest.substr(0, hash);
    } else if (hash != std::string_view::npos) {
        throw ParseError{"fragments are not supported in cluster URIs"};
    }
    parse_hosts_and_db(rest, out, sentinel ? 26379 : 6379, true);
    if (!sentinel && out.database != 0) throw ParseError{"a cluster has only database 0"};
}

ServerAddress parse_or_throw(std::string_view uri) {
    ServerAddress out;
    if (uri.empty()) throw ParseError{"empty URI"};
    auto sep = uri.find("://");
    if (sep == std::string_view::npos) throw ParseError{"missing scheme (redis://, rediss:// or unix://)"};
    auto scheme = uri.substr(0, sep);
    auto rest = uri.substr(sep + 3);
    if (scheme == "unix") {
        out.transport = ServerAddress::Transport::unix_socket;
        out.host.clear();
        out.port = 0;
        auto question = rest.find('?');
        auto path = rest.substr(0, question);
        if (!path.empty() && path[0] != '/') {
            auto at = path.find('@');
            if (at == std::string_view::npos) throw ParseError{"unix socket path must be absolute"};
            parse_userinfo(path.substr(0, at), out);
            path = path.substr(at + 1);
        }
        if (path.size() < 2 || path[0] != '/') throw ParseError{"unix socket path must be absolute and non-empty"};
        out.socket_path = percent_decode(path, "socket path");
        if (auto problem = detail::socket_path_problem(out.socket_path); !problem.empty()) throw ParseError{problem};
        if (question != std::string_view::npos) parse_unix_query(rest.substr(question + 1), out);
        return out;
    }
    if (scheme == "redis" || scheme == "redis-sentinel" || scheme == "redis-cluster") {
        out.transport = ServerAddress::Transport::tcp;
    } else if (scheme == "rediss" || scheme == "rediss-sentinel" || scheme == "rediss-cluster") {
        out.transport = ServerAddress::Transport::tls;
    } else {
        throw ParseError{"unsupported scheme '" + std::string(scheme) +
                         "' (redis, rediss, unix, redis-sentinel, rediss-sentinel, redis-cluster, rediss-cluster)"};
    }
    if (scheme.ends_with("-sentinel")) {
        out.topology = ServerAddress::Topology::sentinel;
        parse_group(rest, out);
        return out;
    }
    if (scheme.ends_with("-cluster")) {
        out.topology = ServerAddress::Topology::cluster;
        parse_group(rest, out);
        return out;
    }
    if (rest.find('?') != std::string_view::npos || rest.find('#') != std::string_view::npos)
        throw ParseError{"query parameters and fragments are not supported in redis:// URIs"};
    parse_hosts_and_db(rest, out, 6379, false);
    return out;
}

}  // namespace

ServerAddress ServerAddress::parse(std::string_view uri, std::error_code& ec, std::string* message) {
    try {
        ec.clear();
        return parse_or_throw(uri);
    } catch (const ParseError& e) {
        ec = errc::invalid_uri;
        if (message) *message = e.reason;
        return {};
    }
}

ServerAddress ServerAddress::parse(std::string_view uri) {
    std::error_code ec;
    std::string message;
    auto address = parse(uri, ec, &message);
    if (ec) throw Error(ec, message);
    return address;
}

namespace {

void append_host_port(std::string& s, const std::string& host, std::uint16_t port) {
    const bool ipv6 = host.find(':') != std::string::npos;
    if (ipv6) s += '[';
    s += host;
    if (ipv6) s += ']';
    s += ':';
    s += std::to_string(port);
}

}  // namespace

std::string ServerAddress::to_string() const {
    std::string credentials;
    if (!password.empty()) credentials = username + ":***@";
    if (transport == Transport::unix_socket) {
        std::string s = "unix://" + credentials + socket_path;
        if (database != 0) s += "?db=" + std::to_string(database);
        return s;
    }
    std::string s = transport == Transport::tls ? "rediss" : "redis";
    if (topology == Topology::sentinel) s += "-sentinel";
    if (topology == Topology::cluster) s += "-cluster";
    s += "://";
    s += credentials;
    if (endpoints.empty() || topology == Topology::standalone) {
        append_host_port(s, host, port);
    } else {
        for (std::size_t i = 0; i < endpoints.size(); ++i) {
            if (i) s += ',';
            append_host_port(s, endpoints[i].host, endpoints[i].port);
        }
    }
    if (database != 0) {
        s += '/';
        s += std::to_string(database);
    }
    if (topology == Topology::sentinel) {
        // Percent-encoded as the URI gave it, so that the text parses back
        // to this name ('%', '#', '/', '?' and the rest).
        s += '#';
        for (unsigned char c : master_name) {
            const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                               c == '-' || c == '.' || c == '_' || c == '~';
            if (plain) {
                s += static_cast<char>(c);
            } else {
                constexpr char hex[] = "0123456789ABCDEF";
                s += '%';
                s += hex[c >> 4];
                s += hex[c & 15];
            }
        }
    }
    return s;
}

ServerAddress ServerAddress::node(std::string node_host, std::uint16_t node_port) const {
    ServerAddress out;
    out.transport = transport;
    out.host = std::move(node_host);
    out.port = node_port;
    out.username = username;
    out.password = password;
    out.database = database;
    return out;
}

}  // namespace dlock
