#include "cli.hpp"

#include <cstdio>

#include "dlock/error.hpp"

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
    if (!global.quiet) options.on_warning = [](std::string_view message) { complain("warning: " + std::string(message)); };
    return options;
}

int exit_code_for(const std::error_code& ec) {
    if (ec == errc::invalid_argument || ec == errc::invalid_uri) return exit_usage;
    return exit_unavailable;
}

void complain(const std::string& message) { std::fprintf(stderr, "dlock: %s\n", message.c_str()); }

std::vector<std::string> split_urls(const std::vector<std::string>& given) {
    std::vector<std::string> urls;
    for (const auto& item : given) {
        std::size_t start = 0;
        while (start <= item.size()) {
            auto comma = item.find(',', start);
            if (comma == std::string::npos) comma = item.size();
            if (comma > start) urls.push_back(item.substr(start, comma - start));
            start = comma + 1;
        }
    }
    return urls;
}

bool enough_masters_reachable(Masters& masters) {
    std::size_t reachable = 0;
    for (std::size_t i = 0; i < masters.size(); ++i) {
        std::error_code ec;
        masters.client(i).wait_connected(ec);
        if (ec) complain("cannot use " + masters.client(i).address().to_string() + ": " + ec.message());
        else ++reachable;
    }
    if (reachable >= masters.quorum()) return true;
    complain("only " + std::to_string(reachable) + " of " + std::to_string(masters.size()) +
             " masters reachable; a Redlock needs " + std::to_string(masters.quorum()));
    return false;
}

}  // namespace dlock::cli
