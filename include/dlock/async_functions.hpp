// dlock/async_functions.hpp — the asynchronous initiating functions, for one
// Asio flavour. Not a header of its own: dlock/async.hpp (standalone Asio,
// namespace dlock) and dlock/boost_async.hpp (Boost.Asio, namespace
// dlock::boost_asio) include it inside their namespace, where `asio` names
// the flavour, detail::completion_error is the error type its handlers take,
// detail::to_completion_error makes one from dlock's std::error_code, and
// DLOCK_ASYNC_CANCELLATION says whether it has per-operation cancellation
// slots. The contract is written in dlock/async.hpp.
// (No include guard: included once per flavour.)

namespace detail {

// Wraps an Asio completion handler as a copyable callback that clears its
// cancellation slot and runs it on its associated executor (inline where it
// has none: the caller is dlock's fiber thread), keeping that executor's
// work alive until then. As everywhere in Asio, a cancellation slot's
// signal must be emitted on the handler's executor; a handler without an
// executor is completed (and its slot cleared) on dlock's fiber thread.
template <typename Handler, typename... Args>
std::function<void(Args...)> completion_of(Handler handler, [[maybe_unused]] std::stop_source stop) {
#if DLOCK_ASYNC_CANCELLATION
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) slot.assign([stop](asio::cancellation_type) mutable { stop.request_stop(); });
#endif
    using Executor = asio::associated_executor_t<Handler, asio::system_executor>;
    struct State {
        Handler handler;
        std::optional<asio::executor_work_guard<Executor>> work;
    };
    auto state = std::make_shared<State>(State{std::move(handler), std::nullopt});
    if constexpr (!std::is_same_v<Executor, asio::system_executor>)
        state->work.emplace(asio::get_associated_executor(state->handler));
    return [state](Args... args) {
        if constexpr (std::is_same_v<Executor, asio::system_executor>) {
#if DLOCK_ASYNC_CANCELLATION
            asio::get_associated_cancellation_slot(state->handler).clear();
#endif
            std::move(state->handler)(std::move(args)...);
        } else {
            // The slot is cleared where it is emitted: on the handler's executor.
            asio::post(state->work->get_executor(), [state, ... args = std::move(args)]() mutable {
#if DLOCK_ASYNC_CANCELLATION
                asio::get_associated_cancellation_slot(state->handler).clear();
#endif
                std::move(state->handler)(std::move(args)...);
            });
            // Only once the post has returned may the executor's context run
            // out of work (and its owner destroy it).
            state->work.reset();
        }
    };
}

// The library's std::error_code, as this flavour's handlers take it.
inline async_entry::PlainCompletion plain_completion(std::function<void(completion_error)> done) {
    return [done = std::move(done)](std::error_code ec) { done(to_completion_error(ec)); };
}

template <typename Token, typename Start>
auto initiate_acquire(Token&& token, Start start) {
    return asio::async_initiate<Token, void(completion_error, AsyncHold)>(
        [start = std::move(start)](auto handler) mutable {
            std::stop_source stop;
            auto done = completion_of<decltype(handler), completion_error, AsyncHold>(std::move(handler), stop);
            start(stop, async_entry::AcquireCompletion([done = std::move(done)](std::error_code ec, AsyncHold hold) {
                      done(to_completion_error(ec), std::move(hold));
                  }));
        },
        token);
}

}  // namespace detail

// ---- Lock, FairLock, Redlock, MultiLock: one exclusive hold ----

template <typename Kind>
concept exclusive_lock_kind = std::derived_from<Kind, Lock> || std::same_as<Kind, Redlock> || std::same_as<Kind, MultiLock>;

// Completes once acquired (or failed, or cancelled).
template <exclusive_lock_kind Kind, typename Token>
auto async_lock(Kind& lock, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token), [&lock](std::stop_source stop, auto done) {
        async_entry::start_acquire(lock, std::nullopt, stop, std::move(done));
    });
}
// Waits until deadline; busy then: an empty hold. A deadline already past
// (or zero timeout) means one attempt.
template <exclusive_lock_kind Kind, typename Clock, typename Duration, typename Token>
auto async_try_lock_until(Kind& lock, const std::chrono::time_point<Clock, Duration>& deadline, Token&& token) {
    std::chrono::steady_clock::time_point at;
    if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>)
        at = std::chrono::ceil<std::chrono::steady_clock::duration>(deadline);  // as given, even time_point::min()
    else
        at = steady_deadline_at(deadline);
    return detail::initiate_acquire(std::forward<Token>(token), [&lock, at](std::stop_source stop, auto done) {
        async_entry::start_acquire(lock, at, stop, std::move(done));
    });
}
template <exclusive_lock_kind Kind, typename Rep, typename Period, typename Token>
auto async_try_lock_for(Kind& lock, const std::chrono::duration<Rep, Period>& timeout, Token&& token) {
    return async_try_lock_until(lock, steady_deadline_in(timeout), std::forward<Token>(token));
}
template <exclusive_lock_kind Kind, typename Token>
auto async_try_lock(Kind& lock, Token&& token) {
    return async_try_lock_until(lock, std::chrono::steady_clock::time_point::min(), std::forward<Token>(token));
}

// ---- RwLock (rw_lock.hpp): the write side as a Lock's, the shared side ----

template <typename Token>
auto async_lock(RwLock& lock, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token), [&lock](std::stop_source stop, auto done) {
        async_entry::start_acquire(lock, false, std::nullopt, stop, std::move(done));
    });
}
template <typename Rep, typename Period, typename Token>
auto async_try_lock_for(RwLock& lock, const std::chrono::duration<Rep, Period>& timeout, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token),
                                    [&lock, at = steady_deadline_in(timeout)](std::stop_source stop, auto done) {
                                        async_entry::start_acquire(lock, false, at, stop, std::move(done));
                                    });
}
template <typename Token>
auto async_lock_shared(RwLock& lock, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token), [&lock](std::stop_source stop, auto done) {
        async_entry::start_acquire(lock, true, std::nullopt, stop, std::move(done));
    });
}
template <typename Rep, typename Period, typename Token>
auto async_try_lock_shared_for(RwLock& lock, const std::chrono::duration<Rep, Period>& timeout, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token),
                                    [&lock, at = steady_deadline_in(timeout)](std::stop_source stop, auto done) {
                                        async_entry::start_acquire(lock, true, at, stop, std::move(done));
                                    });
}

// ---- Semaphore (semaphore.hpp): k permits as one hold ----

template <typename Token>
auto async_acquire(Semaphore& semaphore, unsigned permits, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token), [&semaphore, permits](std::stop_source stop, auto done) {
        async_entry::start_acquire(semaphore, permits, std::nullopt, stop, std::move(done));
    });
}
template <typename Rep, typename Period, typename Token>
auto async_try_acquire_for(Semaphore& semaphore, unsigned permits, const std::chrono::duration<Rep, Period>& timeout,
                           Token&& token) {
    return detail::initiate_acquire(
        std::forward<Token>(token), [&semaphore, permits, at = steady_deadline_in(timeout)](std::stop_source stop, auto done) {
            async_entry::start_acquire(semaphore, permits, at, stop, std::move(done));
        });
}

// ---- Holds ----

// Releases hold (left empty at once) and completes with the release's
// outcome: as the kind's unlock(ec) / release(ec) (not_owner when empty,
// lease_lost when it was lost meanwhile). Not cancellable: a release runs
// to its end (bounded by the retry window).
template <typename Token>
auto async_unlock(AsyncHold& hold, Token&& token) {
    return asio::async_initiate<Token, void(detail::completion_error)>(
        [&hold](auto handler) {
            async_entry::start_release(std::move(hold), detail::plain_completion(
                                                            detail::completion_of<decltype(handler), detail::completion_error>(
                                                                std::move(handler), {})));
        },
        token);
}

// Waits for the event of hold's loss: completes WITHOUT an error when hold
// is lost (no later than its valid_until()); hold.lost_reason() then says
// why (expired, revoked, taken_over, renewal_refused). So a race such as
// `co_await (timer.async_wait(use_awaitable) || async_wait_lost(hold,
// use_awaitable))` ends normally on either event. Completes with an error
// only when the loss can no longer happen: asio::error::operation_aborted
// when hold is released through the AsyncHold first (or empty), or the wait
// is cancelled; errc::client_closed when the client closes. The lock
// object's destructor does not end it: the hold is the AsyncHold's.
template <typename Token>
auto async_wait_lost(const AsyncHold& hold, Token&& token) {
    return asio::async_initiate<Token, void(detail::completion_error)>(
        [&hold](auto handler) {
            std::stop_source stop;
            auto done = detail::completion_of<decltype(handler), detail::completion_error>(std::move(handler), stop);
            async_entry::start_wait_lost(hold, stop, [done = std::move(done)](std::error_code ec) {
                // The loss is the event waited for; its reason stays on the hold.
                done(detail::to_completion_error(ec == errc::lease_lost ? std::error_code() : ec));
            });
        },
        token);
}

