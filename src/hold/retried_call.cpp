#include "retried_call.hpp"

#include "dlock/error.hpp"
#include "redis/command_format.hpp"

namespace dlock::detail {
namespace {

// A dropped connection is being re-established; give it a moment between copies.
constexpr std::chrono::milliseconds retry_pause{10};

bool retryable(std::error_code ec) {
    return outcome_unknown(ec) || ec == errc::connect_timeout || ec == errc::not_connected ||
           ec == errc::connection_refused;
}

}  // namespace

RetriedCall::RetriedCall(std::shared_ptr<ClientCore> client, const Script& script, Clock::time_point give_up_by)
    : client_(std::move(client)),
      client_core_(client_.get()),
      script_(&script),
      window_(give_up_by - Clock::now()),
      give_up_by_(give_up_by) {}

std::shared_ptr<RetriedCall> RetriedCall::start(const std::shared_ptr<ClientCore>& client, const Script& script,
                                                ClientCore::Args keys, ClientCore::Args argv,
                                                Clock::time_point give_up_by, Send how, Migration migration) {
    auto call = std::make_shared<RetriedCall>(client, script, give_up_by);
    call->begin(keys, argv, how, migration);
    return call;
}

void RetriedCall::begin(ClientCore::Args keys, ClientCore::Args argv, Send how, Migration migration) {
    // The text this client sends (Script::for_cluster), kept for every copy and NOSCRIPT detour.
    script_ = &client_core_->script_for_server(*script_);
    const Script& script = *script_;
    migration_ = migration;
    evalsha_.clear();  // a reused call keeps the room
    append_eval(evalsha_, "EVALSHA", script.sha1(), keys, argv);
    first_sent_ = Clock::now();
    if (how == Send::eval_unless_cached && !client_->script_cached(script)) {
        sent_as_eval_ = true;
        client_->note_eval_sent(script);
        send(rewrite_evalsha_as_eval(evalsha_, script.sha1(), script.text()));
    } else {
        send(evalsha_);
    }
}

std::shared_ptr<RetriedCall> RetriedCallPool::idle_call() {
    std::lock_guard lock(mutex_);
    for (auto& kept : kept_) {
        if (kept.use_count() != 1) continue;
        // The last user's release (acq_rel) is seen before the call is touched.
        std::atomic_thread_fence(std::memory_order_acquire);
        return kept;
    }
    return nullptr;
}

std::shared_ptr<RetriedCall> RetriedCallPool::start(const std::shared_ptr<ClientCore>& client, const Script& script,
                                                    ClientCore::Args keys, ClientCore::Args argv,
                                                    Clock::time_point give_up_by, RetriedCall::Send how,
                                                    RetriedCall::Migration migration) {
    auto call = idle_call();
    if (call) {
        call->client_ = client;
        call->client_core_ = client.get();
        call->script_ = &script;
        call->window_ = give_up_by - Clock::now();
        call->give_up_by_ = give_up_by;
        call->was_sent_ = call->sent_as_eval_ = false;
        call->resend_ = {};
        call->unknown_ = {};
        call->outcome_.reset();
    } else {
        call = std::make_shared<RetriedCall>(client, script, give_up_by);
        std::lock_guard lock(mutex_);
        if (kept_.size() < max_kept) kept_.push_back(call);
    }
    call->begin(keys, argv, how, migration);
    return call;
}

void RetriedCall::send(std::string_view bytes) {
    // Each copy may wait for a command timeout, never past the window.
    auto deadline = std::min(Clock::now() + client_->options().command_timeout, give_up_by_);
    // The copy in flight keeps the call alive (the transport answers every
    // submitted command once). The completion itself holds a plain
    // pointer: small enough that the transport's copies of it allocate
    // nothing.
    in_flight_ = shared_from_this();
    client_->submit_formatted(
        bytes,
        [call = this](std::error_code ec, Reply&& reply) {
            const auto self = std::move(call->in_flight_);
            self->on_reply(ec, std::move(reply));
        },
        deadline);
}

void RetriedCall::on_reply(std::error_code ec, Reply&& reply) {
    if (sent_as_eval_) client_->note_eval_answered(*script_);  // every copy since the first EVAL went as EVAL
    if (ec == errc::no_script && !sent_as_eval_) {
        // The server forgot the script (SCRIPT FLUSH, restart, failover):
        // the same call again, as EVAL or behind an EVAL already sent
        // (ClientCore::resend_after_no_script). Once as EVAL: a server that
        // keeps saying NOSCRIPT gets an error, not a loop.
        auto bytes = client_->resend_after_no_script(*script_, evalsha_, resend_);
        sent_as_eval_ = resend_.eval;
        return send(bytes);
    }
    // An answer means the server ran the script, so has it now. Not an
    // error: BUSY or LOADING come without the script being looked up.
    if (!ec) client_->note_script_cached(*script_);
    if (ec == errc::slot_migrating) {
        // TRYAGAIN: the slot's keys are split by a migration, which a
        // cluster does in normal operation, and the call did not run (the
        // router already waited out one command timeout). The server is
        // there and answering, so while the caller still waits the retry
        // window starts again: however long the migration takes, the call
        // ends by the caller's deadline, and one window after it at most.
        if (migration_ == Migration::while_awaited && outcome_.awaited())
            give_up_by_ = std::max(give_up_by_, Clock::now() + window_);
        if (Clock::now() + retry_pause >= give_up_by_) return finish(ec, std::move(reply));
        return resend_after_pause();
    }
    if (!ec || !retryable(ec)) return finish(ec, std::move(reply));
    if (outcome_unknown(ec)) {
        was_sent_ = true;
        if (!unknown_) unknown_ = ec;
    }
    if (!was_sent_ || Clock::now() + retry_pause >= give_up_by_) return finish(ec, std::move(reply));
    resend_after_pause();
}

void RetriedCall::resend_after_pause() {
    if (!retry_timer_) retry_timer_.emplace(client_->io());
    retry_timer_->expires_after(retry_pause);
    retry_timer_->async_wait([self = shared_from_this()](std::error_code timer_ec) {
        if (timer_ec) return self->finish(errc::client_closed, Reply{});
        // The form last sent: once it went as EVAL, a copy after a reconnect
        // (maybe to a restarted server) goes as EVAL too.
        if (self->sent_as_eval_) {
            self->client_->note_eval_sent(*self->script_);
            return self->send(rewrite_evalsha_as_eval(self->evalsha_, self->script_->sha1(), self->script_->text()));
        }
        self->send(self->evalsha_);
    });
}

void RetriedCall::finish(std::error_code ec, Reply&& reply) {
    // Unanswered, after a copy that may have run: the caller must treat it
    // as maybe run (and undo a grant nobody will use), whatever the later
    // copies heard (TRYAGAIN, a refused connection, LOADING or another error
    // reply after a failover). Only a closing client is told as such.
    if (ec && unknown_ && !outcome_unknown(ec) && ec != errc::client_closed) {
        ec = unknown_;
        reply = Reply{};
    }
    // Nothing of the client is kept past the outcome (a kept call would
    // keep it alive); the caller waiting for it keeps the client.
    retry_timer_.reset();
    auto client = std::move(client_);
    outcome_.deliver(Answer{ec, std::move(reply)});
}

bool RetriedCall::wait(std::optional<Clock::time_point> deadline, std::stop_token stop, std::error_code& ec,
                       Reply& reply, Done if_walked_away) {
    return wait_making(deadline, stop, ec, reply, [&] { return std::move(if_walked_away); });
}

bool RetriedCall::wait_making(std::optional<Clock::time_point> deadline, std::stop_token stop, std::error_code& ec,
                              Reply& reply, FunctionRef<Done()> make_if_walked_away) {
    Answer answer;
    const auto make = [&]() -> AwaitedOutcome<Answer>::Handler {
        return [handler = make_if_walked_away ? make_if_walked_away() : Done()](Answer&& late) {
            if (handler) handler(late.ec, std::move(late.reply));
        };
    };
    if (!outcome_.wait(*client_core_, deadline, stop, answer, make)) return false;
    ec = answer.ec;
    reply = std::move(answer.reply);
    return true;
}

}  // namespace dlock::detail
