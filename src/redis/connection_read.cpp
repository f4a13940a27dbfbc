#include "connection_internal.hpp"

namespace dlock::detail {

// Reading and delivering replies (I/O thread).

void Connection::read_loop(std::uint64_t attempt) {
    stream_->async_read_some(asio::buffer(read_buffer_), [self = shared_from_this(), attempt](std::error_code ec, std::size_t n) {
        if (attempt != self->attempt_) return;
        self->guarded([&] {
            if (ec) {
                bool ready;
                {
                    std::lock_guard lock(self->mutex_);
                    ready = self->state_ == State::ready;
                }
                if (ready) self->drop(errc::connection_lost);
                else self->fail_attempt(map_connect_error(ec), self->closed_in_handshake(ec));
                return;
            }
            self->reader_->feed(self->read_buffer_.data(), n);
            self->process_replies();
            if (attempt == self->attempt_ && !self->maybe_park()) self->read_loop(attempt);
        });
    });
}

void Connection::process_replies() {
    const auto attempt = attempt_;
    std::error_code ec;
    Reply reply;
    while (attempt == attempt_ && handshake_done_ < handshake_.size()) {
        if (!reader_->next(reply, ec)) break;
        handle_handshake_reply(reply);
    }
    if (attempt != attempt_ || handshake_done_ < handshake_.size()) {
        if (ec) fail_attempt(ec, "bad reply during handshake");
        return;
    }
    replies_.clear();
    while (reader_->next(reply, ec)) replies_.push_back(std::move(reply));
    if (!replies_.empty()) deliver(replies_);
    if (!ec || attempt != attempt_) return;
    drop_over_limit(ec);
}

ReplyLimit Connection::limit_of_reply(const ReplyReader& session, std::size_t handshake_replies, std::size_t index) {
    // Replies come in the order of what was sent: the handshake's, then
    // pending_'s, of which delivered_ were handed out already.
    if (index < handshake_replies) return {};
    const auto at = index - handshake_replies;
    std::lock_guard lock(mutex_);
    // A session that ended (a caller reads what it left in its socket):
    // pending_ is the next session's, owed nothing of this one's.
    if (reader_.get() != &session) return {};
    if (at < delivered_ || at - delivered_ >= pending_.size()) return {};
    return pending_[at - delivered_].limit;
}

// The reply at the front failed: over a limit of its own (frame_check.hpp)
// or over its memory budget (reply_reader.hpp), its caller is told which,
// the others in flight that the connection was lost. Anything else the
// reader reported fails them all with it.
void Connection::drop_over_limit(std::error_code ec) {
    auto detail = reader_->limit_detail();
    const auto memory = reader_->memory_detail();
    Completion offender;
    {
        std::lock_guard lock(mutex_);
        if (detail.empty() && memory.empty()) {
        } else if (mode_ == Mode::subscriber || state_ != State::ready || pending_.empty()) {
            detail.clear();  // a push, or nobody waits for it
        } else {
            if (!memory.empty()) {
                const auto& limit = pending_.front().limit;
                const auto what = limit.what.empty() ? "'" + std::string(limit.command.data()) + "'" : std::string(limit.what);
                detail = "the reply to " + what + " from " + address_.to_string() + " " + memory +
                         ": the server is hostile or broken, or the reply needs a larger max_reply_overhead; the "
                         "connection was reset";
            }
            offender = std::move(pending_.front().done);
            pending_.pop_front();
        }
    }
    if (!offender) return drop(ec);
    // The session ends before its caller hears why: a caller that sends
    // again at once must find the connection reconnecting, not the doomed
    // socket (its next command would be lost with it, in flight). And it
    // hears first, before the commands behind it: completions run in the
    // order of their commands.
    drop(errc::connection_lost, [&] { ran_cleanly([&] { offender(ec, Reply::make_error(std::move(detail))); }); });
}

// A completion or listener that throws does not stop the others of this
// read: each caller still gets its reply. A reply's completion had its reply
// in full, so what it threw is its caller's own affair: the exception is
// dropped and the connection goes on (a reset would fail every other command
// in flight on it, and a lock command failed that way has an unknown
// outcome). A listener that threw may have missed a push it was told, so a
// subscriber connection is dropped: it resubscribes and announces the gap.
void Connection::deliver(std::vector<Reply>& replies) {
    if (mode_ == Mode::subscriber) {
        bool clean = true;
        for (auto& r : replies) clean &= ran_cleanly([&] { hooks_.on_push(std::move(r)); });
        if (!clean) drop(errc::connection_lost);
        return;
    }
    auto& completions = completions_;
    completions.clear();
    bool unexpected = false;
    {
        std::lock_guard lock(mutex_);
        for (std::size_t i = 0; i < replies.size(); ++i) {
            if (pending_.empty()) {
                unexpected = true;
                replies.resize(i);
                break;
            }
            completions.push_back(std::move(pending_.front().done));
            pending_.pop_front();
            ++delivered_;
        }
    }
    // Completions run outside the lock: they may submit again (the EVAL
    // fallback does). They cannot reenter deliver(): only a read calls it.
    bool demoted = false;
    for (std::size_t i = 0; i < completions.size(); ++i) {
        std::error_code ec = replies[i].error_code();
        if (target_->demoted_by(replies[i])) {
            // The master became a replica under us (a failover): the command
            // did not run here, and what follows it will not either. It fails
            // as a lost connection would, so that the lock layer's retry
            // carries it to the new master; READONLY never reaches the caller.
            ec = errc::connection_lost;
            demoted = true;
        }
        ran_cleanly([&] { completions[i](ec, std::move(replies[i])); });
    }
    completions.clear();
    if (demoted) {
        target_->unusable(address_);
        drop(errc::connection_lost);
        return;
    }
    if (unexpected) drop(errc::protocol_error);
}

}  // namespace dlock::detail
