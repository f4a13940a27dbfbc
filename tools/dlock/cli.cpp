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
    return options;
}

int exit_code_for(const std::error_code& ec) {
    if (ec == errc::invalid_argument || ec == errc::invalid_uri) return exit_usage;
    return exit_unavailable;
}

void complain(const std::string& message) { std::fprintf(stderr, "dlock: %s\n", message.c_str()); }

}  // namespace dlock::cli
