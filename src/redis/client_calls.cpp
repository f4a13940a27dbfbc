// The client core's calls: commands and scripts submitted (with the EVALSHA
// to EVAL fallback), several in one write, and the blocking calls that wait
// for their reply.
#include "client_core.hpp"

#include "runtime/condition.hpp"
#include "runtime/thread_kept.hpp"
#include "runtime/wake_count.hpp"


#include "command_format.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// Formatting happens before any lock is taken; one buffer per thread keeps
// the hot path free of allocations (fallback: a call made while the
// thread ends, runtime/thread_kept.hpp).
struct FormatBufferTag;
std::string& format_buffer(std::string& fallback) {
    auto& buffer = thread_kept_or<FormatBufferTag>(fallback);
    buffer.clear();
    // A huge command (a user's large value) is not kept for the thread's life.
    if (buffer.capacity() > kept_buffer_capacity) std::string().swap(buffer);
    return buffer;
}

// The completion of a call sent as EVALSHA: on NOSCRIPT (SCRIPT FLUSH,
// restart, failover) the same call goes again, as
// ClientCore::resend_after_no_script says, with this as its completion.
struct NoScriptDetour {
    std::weak_ptr<ClientCore> core;
    Script script;
    std::string evalsha;
    Completion done;
    Clock::time_point deadline;
    ClientCore::ScriptResend resend{};

    void operator()(std::error_code ec, Reply&& reply) {
        auto client = core.lock();
        if (client && resend.eval) client->note_eval_answered(script);
        if (ec != errc::no_script || !client) return done(ec, std::move(reply));
        auto bytes = client->resend_after_no_script(script, evalsha, resend);
        if (bytes.empty()) return done(ec, std::move(reply));
        const auto until = deadline;
        client->submit_formatted(bytes, std::move(*this), until);  // nothing of this is used after
    }
};

struct SyncCall {
    WakeCount done;
    std::error_code ec;
    Reply reply;
    // A fiber's call (an asynchronous operation) parks instead; made before
    // the call is sent, only for a fiber.
    std::mutex mutex;
    bool answered = false;
    std::unique_ptr<Condition> parked;
};

}  // namespace

void ClientCore::submit_formatted(std::string_view formatted, Completion done, Clock::time_point deadline) {
    std::error_code ec = usable();
    if (!ec) {
        ec = topology_->submit(formatted, done, deadline);
        if (!ec) return;
    }
    fail_soon(done, ec);
}

void ClientCore::submit(Args args, Completion done) {
    std::string fallback;
    auto& bytes = format_buffer(fallback);
    append_command(bytes, args);
    submit_formatted(bytes, std::move(done), deadline());
}

void ClientCore::eval_async(const Script& script, Args keys, Args argv, Completion done) {
    eval_async(script, keys, argv, std::move(done), deadline());
}

void ClientCore::eval_async(const Script& any_text, Args keys, Args argv, Completion done, Clock::time_point deadline) {
    const Script& script = script_for_server(any_text);
    std::string fallback;
    auto& bytes = format_buffer(fallback);
    append_eval(bytes, "EVALSHA", script.sha1(), keys, argv);
    submit_formatted(bytes, NoScriptDetour{weak_from_this(), script, std::string(bytes), std::move(done), deadline},
                     deadline);
}

std::string ClientCore::resend_after_no_script(const Script& script, std::string_view evalsha, ScriptResend& resend) {
    if (resend.eval) return {};
    recorder().event(ClientEvent::script_reload);
    const auto session = topology_->script_session();
    if (!resend.evalsha_again && session && known_scripts_.eval_sent(script.sha1(), *session)) {
        resend.evalsha_again = true;
        return std::string(evalsha);
    }
    resend.eval = true;
    note_eval_sent(script);
    return rewrite_evalsha_as_eval(evalsha, script.sha1(), script.text());
}

template <typename Start>
Reply ClientCore::wait_for(Start start, std::error_code& ec) noexcept {
    try {
        if ((ec = usable())) return {};
        if (on_io_thread()) {
            ec = errc::invalid_argument;  // a blocking call here would wait for itself
            return {};
        }
        auto call = std::make_shared<SyncCall>();
        if (Fiber::current()) call->parked = std::make_unique<Condition>();
        auto until = deadline();
        DriveScope driving(may_drive());
        start(
            [call](std::error_code e, Reply&& r) {
                call->ec = e;
                call->reply = std::move(r);
                if (call->parked) {
                    {
                        std::lock_guard lock(call->mutex);
                        call->answered = true;
                    }
                    call->parked->notify_all();
                }
                call->done.release();
            },
            until);
        if (Fiber::current()) {
            std::unique_lock lock(call->mutex);
            if (!call->parked->wait_until(lock, until, [&] { return call->answered; })) {
                ec = errc::command_timeout;
                return {};
            }
        } else if (!drive_for(call->done, until) && !call->done.try_acquire_until(until)) {
            ec = errc::command_timeout;
            return {};
        }
        ec = call->ec;
        return std::move(call->reply);
    } catch (const std::bad_alloc&) {
        ec = std::make_error_code(std::errc::not_enough_memory);
        return {};
    }
}

Reply ClientCore::call(Args args, std::error_code& ec) noexcept {
    return wait_for(
        [&](Completion done, Clock::time_point until) {
            std::string fallback;
    auto& bytes = format_buffer(fallback);
            append_command(bytes, args);
            submit_formatted(bytes, std::move(done), until);
        },
        ec);
}

Reply ClientCore::call_on(const ServerAddress& master, Args args, std::error_code& ec) noexcept {
    return wait_for(
        [&](Completion done, Clock::time_point until) {
            std::string fallback;
    auto& bytes = format_buffer(fallback);
            append_command(bytes, args);
            if (auto failed = topology_->submit_to(master, bytes, done, until)) fail_soon(done, failed);
        },
        ec);
}

Reply ClientCore::eval(const Script& script, Args keys, Args argv, std::error_code& ec) noexcept {
    return wait_for(
        [&](Completion done, Clock::time_point until) { eval_async(script, keys, argv, std::move(done), until); }, ec);
}

void ClientCore::eval_many(const Script& any_text, std::vector<EvalCall>& calls) {
    if (calls.empty()) return;
    const Script& script = script_for_server(any_text);
    const auto until = deadline();
    std::vector<std::string> formatted(calls.size());
    std::vector<Completion> dones;
    dones.reserve(calls.size());
    auto self = weak_from_this();
    for (std::size_t i = 0; i < calls.size(); ++i) {
        std::vector<std::string_view> keys(calls[i].keys.begin(), calls[i].keys.end());
        std::vector<std::string_view> argv(calls[i].argv.begin(), calls[i].argv.end());
        append_eval(formatted[i], "EVALSHA", script.sha1(), keys, argv);
        dones.push_back(NoScriptDetour{self, script, formatted[i], std::move(calls[i].done), until});
    }
    std::vector<std::string_view> views(formatted.begin(), formatted.end());
    submit_many(views, dones);
}

void ClientCore::submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones) {
    submit_many(formatted, dones, deadline());
}

void ClientCore::submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                             Clock::time_point until) {
    if (dones.empty()) return;
    std::error_code ec = usable();
    if (!ec)
        ec = topology_->submit_many(formatted, dones, until);
    if (!ec) return;
    for (auto& done : dones)
        if (done) fail_soon(done, ec);
}

}  // namespace dlock::detail
