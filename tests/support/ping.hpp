// A PING through the client under test, for tests that only ask "does it work now".
#pragma once

#include <string_view>
#include <system_error>

#include "dlock/client.hpp"

namespace dlock::support {

// The error of one PING; empty when the server answered.
inline std::error_code ping(Client& client) {
    std::error_code ec;
    std::string_view args[] = {"PING"};
    client.command(args, ec);
    return ec;
}

}  // namespace dlock::support
