// The server URI parser on arbitrary text: it must never crash, the two
// overloads must agree, and what it accepts must be an address dlock can
// use (port, database and socket path within their ranges). A TCP address
// without credentials survives its own to_string() unchanged.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/server_address.hpp"
#include "fuzz_check.hpp"

using dlock::ServerAddress;

namespace {

bool parses_throwing(std::string_view uri) {
    try {
        (void)ServerAddress::parse(uri);
        return true;
    } catch (const dlock::Error& e) {
        FUZZ_CHECK(e.code() == dlock::errc::invalid_uri);
        return false;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view uri(reinterpret_cast<const char*>(data), size);
    std::error_code ec;
    std::string reason;
    const auto address = ServerAddress::parse(uri, ec, &reason);
    FUZZ_CHECK(parses_throwing(uri) == !ec);
    if (ec) {
        FUZZ_CHECK(ec == dlock::errc::invalid_uri);
        FUZZ_CHECK(!reason.empty());
        return 0;
    }
    FUZZ_CHECK(address.database >= 0 && address.database <= INT_MAX);
    const auto shown = address.to_string();
    // A log line never shows the password.
    if (!address.password.empty()) FUZZ_CHECK(shown.find(":***@") != std::string::npos);
    if (address.transport == ServerAddress::Transport::unix_socket) {
        FUZZ_CHECK(!address.socket_path.empty() && address.socket_path[0] == '/');
        FUZZ_CHECK(address.socket_path.size() <= ServerAddress::max_socket_path);
        FUZZ_CHECK(address.socket_path.find('\0') == std::string::npos);
        return 0;
    }
    FUZZ_CHECK(address.port >= 1);
    FUZZ_CHECK(!address.host.empty());
    if (address.password.empty() && address.username.empty()) {
        std::error_code again_ec;
        const auto again = ServerAddress::parse(shown, again_ec);
        FUZZ_CHECK(!again_ec);
        FUZZ_CHECK(again.transport == address.transport && again.host == address.host &&
                   again.port == address.port && again.database == address.database);
        FUZZ_CHECK(again.topology == address.topology && again.endpoints == address.endpoints &&
                   again.master_name == address.master_name);
    }
    return 0;
}
