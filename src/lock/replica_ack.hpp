// A lock script followed by WAIT on a dedicated connection: the script's
// write and the WAIT that counts its replica acknowledgements must share a
// connection, and WAIT must not stall the shared one (DESIGN: Transport).
//
// WAIT is sent only after the script's reply, and only when that reply says
// the script wrote what replicas must confirm (a grant, a renewal): a lock
// that was busy costs no WAIT. WAIT's own timeout is ack.timeout, cut short
// to end by the caller's deadline when there is one.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <stop_token>
#include <string_view>
#include <system_error>

#include "dlock/lock.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"
#include "redis/client_core.hpp"

namespace dlock::detail {

struct AcknowledgedAnswer {
    std::error_code ec;
    Reply reply;             // the script's
    long long replicas = 0;  // replicas that acknowledged; 0 when no WAIT was sent
};

// Once, on the I/O thread.
using AcknowledgedDone = std::function<void(AcknowledgedAnswer&&)>;
// Whether the script's reply is a write the replicas must confirm.
using NeedsAcknowledgement = bool (*)(const Reply&);

void eval_acknowledged_async(ClientCore& client, const Script& script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> argv, const ReplicaAck& ack,
                             NeedsAcknowledgement needs_ack, std::optional<Clock::time_point> wait_by,
                             AcknowledgedDone done);

// Blocking until the answer, the caller's deadline, or stop. False when the
// caller walked away: the answer then goes to if_walked_away when it comes
// (at most ack.timeout + command_timeout after the call).
bool eval_acknowledged(ClientCore& client, const Script& script, std::span<const std::string_view> keys,
                       std::span<const std::string_view> argv, const ReplicaAck& ack, NeedsAcknowledgement needs_ack,
                       std::optional<Clock::time_point> deadline, std::stop_token stop, AcknowledgedAnswer& answer,
                       AcknowledgedDone if_walked_away);

}  // namespace dlock::detail
