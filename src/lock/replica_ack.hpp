// A lock script followed by WAIT on a dedicated connection: the script's
// write and the WAIT that counts its replica acknowledgements must share a
// connection, and WAIT must not stall the shared one (DESIGN: Transport).
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <system_error>

#include "dlock/lock.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"
#include "redis/client_core.hpp"

namespace dlock::detail {

// done(ec, script's reply, replicas that acknowledged); once, on the I/O thread.
using AcknowledgedDone = std::function<void(std::error_code, Reply&&, long long replicas)>;

void eval_acknowledged_async(ClientCore& client, const Script& script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> argv, const ReplicaAck& ack, AcknowledgedDone done);

// Blocking: waits at most ack.timeout + command_timeout.
Reply eval_acknowledged(ClientCore& client, const Script& script, std::span<const std::string_view> keys,
                        std::span<const std::string_view> argv, const ReplicaAck& ack, long long& replicas,
                        std::error_code& ec);

}  // namespace dlock::detail
