#include "replica_ack.hpp"

#include <algorithm>
#include <memory>

#include "dlock/error.hpp"
#include "hold/awaited_outcome.hpp"
#include "redis/command_format.hpp"

namespace dlock::detail {

void eval_acknowledged_async(ClientCore& client, const Script& script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> argv, const ReplicaAck& ack,
                             NeedsAcknowledgement needs_ack, std::optional<Clock::time_point> wait_by,
                             AcknowledgedDone done) {
    std::string eval;
    // EVAL, not EVALSHA: a NOSCRIPT here would need another round on this
    // connection. Redis caches EVAL'd scripts, so this costs only the bytes.
    append_eval(eval, "EVAL", client.script_for_server(script).text(), keys, argv);
    auto then_wait = [needs_ack, replicas = std::to_string(ack.replicas), longest = ack.timeout,
                      wait_by](const Reply& reply) -> std::optional<std::string> {
        if (!needs_ack(reply)) return std::nullopt;
        // WAIT 0 would wait forever: at least a millisecond.
        auto timeout = longest;
        if (wait_by)
            timeout = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(*wait_by - Clock::now()),
                                 std::chrono::milliseconds(1), longest);
        const auto ms = std::to_string(timeout.count());
        std::string wait;
        std::string_view args[] = {"WAIT", replicas, ms};
        append_command(wait, args);
        return wait;
    };
    client.submit_dedicated(
        std::move(eval), std::move(then_wait),
        [done = std::move(done), metrics = client.metrics(), wanted = ack.replicas](std::error_code ec,
                                                                                    std::vector<Reply>&& replies) {
            AcknowledgedAnswer answer{ec, {}, 0};
            if (!replies.empty()) answer.reply = std::move(replies[0]);
            else if (!ec) answer.ec = errc::protocol_error;
            if (replies.size() > 1 && replies[1].is_integer()) {
                answer.replicas = replies[1].integer;
                if (answer.replicas < static_cast<long long>(wanted))
                    metrics->recorder().event(ClientEvent::replica_ack_shortfall);
            }
            done(std::move(answer));
        },
        Clock::now() + ack.timeout + client.options().command_timeout);
}

bool eval_acknowledged(ClientCore& client, const Script& script, std::span<const std::string_view> keys,
                       std::span<const std::string_view> argv, const ReplicaAck& ack, NeedsAcknowledgement needs_ack,
                       std::optional<Clock::time_point> deadline, std::stop_token stop, AcknowledgedAnswer& answer,
                       AcknowledgedDone if_walked_away) {
    auto outcome = std::make_shared<AwaitedOutcome<AcknowledgedAnswer>>();
    eval_acknowledged_async(client, script, keys, argv, ack, needs_ack, deadline,
                            [outcome](AcknowledgedAnswer&& a) { outcome->deliver(std::move(a)); });
    // The conversation's own deadline ends it; the margin is for a client
    // closing meanwhile, whose I/O thread may no longer deliver anything.
    auto until = Clock::now() + ack.timeout + client.options().command_timeout + std::chrono::seconds(1);
    if (deadline) until = std::min(until, *deadline);
    return outcome->wait(client, until, stop, answer, [&] {
        return AwaitedOutcome<AcknowledgedAnswer>::Handler(std::move(if_walked_away));
    });
}

}  // namespace dlock::detail
