#include "replica_ack.hpp"

#include <future>

#include "dlock/error.hpp"
#include "redis/command_format.hpp"

namespace dlock::detail {

void eval_acknowledged_async(ClientCore& client, const Script& script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> argv, const ReplicaAck& ack, AcknowledgedDone done) {
    std::vector<std::string> commands(2);
    // EVAL, not EVALSHA: a NOSCRIPT here would need a second WAIT round.
    // Redis caches EVAL'd scripts, so this costs only the bytes.
    append_eval(commands[0], "EVAL", script.text(), keys, argv);
    const auto replicas = std::to_string(ack.replicas), timeout = std::to_string(ack.timeout.count());
    std::string_view wait[] = {"WAIT", replicas, timeout};
    append_command(commands[1], wait);
    client.submit_dedicated(
        std::move(commands),
        [done = std::move(done)](std::error_code ec, std::vector<Reply>&& replies) {
            if (replies.size() != 2) return done(ec ? ec : make_error_code(errc::protocol_error), Reply{}, 0);
            long long acknowledged = replies[1].is_integer() ? replies[1].integer : 0;
            done(ec, std::move(replies[0]), acknowledged);
        },
        Clock::now() + ack.timeout + client.options().command_timeout);
}

Reply eval_acknowledged(ClientCore& client, const Script& script, std::span<const std::string_view> keys,
                        std::span<const std::string_view> argv, const ReplicaAck& ack, long long& replicas,
                        std::error_code& ec) {
    struct Result {
        std::error_code ec;
        Reply reply;
        long long replicas = 0;
    };
    auto promise = std::make_shared<std::promise<Result>>();
    auto future = promise->get_future();
    eval_acknowledged_async(client, script, keys, argv, ack, [promise](std::error_code e, Reply&& r, long long n) {
        promise->set_value(Result{e, std::move(r), n});
    });
    // The connection fails the call by its deadline; the margin is for a client closing meanwhile.
    if (future.wait_for(ack.timeout + client.options().command_timeout + std::chrono::seconds(1)) !=
        std::future_status::ready) {
        ec = errc::command_timeout;
        return {};
    }
    auto result = future.get();
    ec = result.ec;
    replicas = result.replicas;
    return std::move(result.reply);
}

}  // namespace dlock::detail
