// Checks on a ServerAddress that parse() makes, shared with the client, which
// also accepts addresses built field by field.
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

// Why the kernel would refuse this unix socket path, or empty when it is fine.
std::string socket_path_problem(std::string_view path);

}  // namespace dlock::detail
