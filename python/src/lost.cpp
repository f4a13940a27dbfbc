// lock.lost (LostEvent): the event, and how its reason outlives the hold.
#include <condition_variable>

#include "binding.hpp"

namespace dlock::python {

struct LostEvent::State {
    // The stop callback on the event's token: notes the event on the thread
    // that requests the token, for on_lost to settle right after.
    struct Note {
        std::weak_ptr<State> state;
        void operator()() const noexcept;
    };

    std::mutex mutex;
    std::condition_variable settled;
    std::optional<LostReason> reason;
    Query query;
    bool mine_only = false;
    std::thread::id maker = std::this_thread::get_id();
    std::optional<std::stop_callback<Note>> note;

    void settle(std::optional<LostReason> why) {
        if (!why) return;
        {
            std::lock_guard lock(mutex);
            if (reason) return;  // the first report stands
            reason = why;
        }
        settled.notify_all();
    }
    std::optional<LostReason> settled_reason() {
        std::lock_guard lock(mutex);
        return reason;
    }
};

namespace {

// The events whose token this thread requested, waiting for on_lost.
thread_local std::vector<std::weak_ptr<LostEvent::State>> noted;
// Set while this thread registers a Note: a token requested already runs
// it here at once, and the constructor asks the query itself.
thread_local bool registering = false;

// How long a thread other than the event's maker waits, after the token is
// requested, for on_lost to settle the reason (it follows at once on dlock's
// thread; the bound only keeps a broken promise from hanging the caller).
constexpr auto settle_wait = std::chrono::seconds(1);

}  // namespace

void LostEvent::State::Note::operator()() const noexcept {
    if (registering) return;
    try {
        noted.push_back(state);
    } catch (...) {
        // No memory: the event is still set; its reason is asked of the hold.
    }
}

LostEvent::LostEvent(std::stop_token token, Query query, bool mine_only)
    : token_(std::move(token)), state_(std::make_shared<State>()) {
    state_->query = std::move(query);
    state_->mine_only = mine_only;
    if (!token_.stop_requested()) {
        registering = true;
        state_->note.emplace(token_, State::Note{state_});
        registering = false;
    }
    // Lost before (or while) the note was made: its on_lost may have run
    // already, and this thread may ask its hold (it holds the lost hold until it releases it).
    if (token_.stop_requested() && state_->query) state_->settle(state_->query());
}

void LostEvent::settle_noted(std::optional<LostReason> reason) noexcept {
    auto events = std::move(noted);
    noted.clear();
    for (auto& weak : events)
        if (auto state = weak.lock()) state->settle(reason);
}

std::optional<LostReason> LostEvent::reason() const {
    if (!state_) return std::nullopt;
    if (auto reason = state_->settled_reason()) return reason;
    if (!token_.stop_requested()) return std::nullopt;
    // Requested, and on_lost not yet run: it is on its way on dlock's thread.
    if (state_->query && (!state_->mine_only || std::this_thread::get_id() == state_->maker)) {
        state_->settle(state_->query());
        if (auto reason = state_->settled_reason()) return reason;
    }
    py::gil_scoped_release released;
    std::unique_lock lock(state_->mutex);
    state_->settled.wait_for(lock, settle_wait, [&] { return state_->reason.has_value(); });
    return state_->reason;
}

bool LostEvent::wait(std::optional<double> timeout) const {
    // As threading.Event.wait: None waits for ever, zero or less not at all.
    if (timeout && !(*timeout > 0)) return is_set();
    const Deadline deadline = deadline_in(timeout);
    std::stop_token lost = token_;
    return wait_interruptibly(
        [&](std::stop_token stop) {
            std::mutex mutex;
            std::condition_variable_any changed;
            std::stop_callback on_lost(lost, [&] {
                std::lock_guard lock(mutex);
                changed.notify_all();
            });
            std::unique_lock lock(mutex);
            auto fired = [&] { return lost.stop_requested(); };
            if (deadline) return changed.wait_until(lock, stop, *deadline, fired);
            return changed.wait(lock, stop, fired);
        },
        [] {});
}

py::bytes name_bytes(const std::string& name) { return py::bytes(name); }

py::str text_of(const std::string& text) {
    PyObject* decoded = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
    if (!decoded) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(decoded);
}

}  // namespace dlock::python
