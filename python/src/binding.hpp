// What the binding's translation units share: the client wrapper, deadlines
// read as threading.Lock reads them, the interruptible wait, loss notices.
#pragma once

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/redlock.hpp"
#include "dlock/semaphore.hpp"
#include "holder.hpp"

namespace py = pybind11;

namespace dlock::python {

// A Client (or Redlock's Masters) that Python may close before the objects
// made through it go: get() raises ClientClosed after close().
template <typename T>
struct Closable {
    std::unique_ptr<T> object;

    T& get() const {
        if (!object) throw Error(make_error_code(errc::client_closed), std::string(closed_text(object.get())));
        return *object;
    }
    // Releases what is held through it; waits for the answers without the GIL.
    void close() {
        std::unique_ptr<T> closing = std::move(object);
        py::gil_scoped_release released;
        closing.reset();
    }
    // close(), closed
    template <typename Class>
    static void bind(Class& cls) {
        cls.def("close", &Closable::close).def_property_readonly("closed", [](const Closable& self) {
            return !self.object;
        });
    }

private:
    static std::string_view closed_text(const Client*) { return "dlock.Client is closed"; }
    static std::string_view closed_text(const Masters*) { return "dlock.Masters is closed"; }
};
using PyClient = Closable<Client>;
using PyMasters = Closable<Masters>;

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// threading.Lock.acquire's arguments: blocking=False is one attempt (a
// timeout other than -1 is then a ValueError); timeout=-1 waits for ever
// (nothing); any other negative timeout is a ValueError.
Deadline deadline_of(bool blocking, double timeout);
// now + seconds, rounded up; nothing for a negative value.
Deadline deadline_in(std::optional<double> seconds);

// Runs attempt(stop) with the GIL released and returns what it returned. On
// the main thread a signal Python handles (SIGINT: Ctrl-C) requests stop;
// the signal's Python handler then runs at once, and when it raises
// (KeyboardInterrupt), what attempt acquired meanwhile is given back with
// undo() and the exception propagates; when it does not, the attempt runs
// again (the deadline inside it is absolute). Other threads wait
// uninterrupted: Python delivers signals to the main thread only.
bool wait_interruptibly(const std::function<bool(std::stop_token)>& attempt, const std::function<void()>& undo);

// The Python exception for ec (a dlock.Error subclass), with detail and the
// server's last error text (dlock::last_server_error) in its message.
[[noreturn]] void throw_code(std::error_code ec, const std::string& detail);
py::object error_object(std::error_code ec, const std::string& detail);

// LockOptions::on_lost from a Python callable (or None): called with the
// reason's name ("expired", "revoked", "taken_over", "renewal_refused") on
// the dispatch thread, with the GIL held.
std::function<void(std::string_view, std::error_code)> on_lost_of(const py::object& callable);
py::object reason_name(std::optional<LostReason> reason);

// lock.lost: whether the caller's hold was lost, as threading.Event's
// reading side, with the reason the loss was reported with. The reason stays
// readable after the hold is released or taken again: dlock requests a
// hold's lost token and, at once on the same thread, calls its on_lost
// (every lock object of this module has one, on_lost_of); the event notes
// itself when its token is requested, and that on_lost settles the noted
// events with its reason.
class LostEvent {
public:
    // The hold's reason now (nothing once it is released).
    using Query = std::function<std::optional<LostReason>()>;

    LostEvent() = default;  // nothing held: never set
    // mine_only: query answers about the calling thread's hold, so only the
    // thread that made the event asks it.
    LostEvent(std::stop_token token, Query query, bool mine_only);

    bool is_set() const { return token_.stop_requested(); }
    bool wait(std::optional<double> timeout) const;
    std::optional<LostReason> reason() const;

    // From on_lost, on the thread that requested the token: settles the
    // events that noted the loss there.
    static void settle_noted(std::optional<LostReason> reason) noexcept;

    struct State;

private:
    std::stop_token token_;
    std::shared_ptr<State> state_;
};

// A name as Python gets it back from dlock: bytes (python/dlock maps it to
// the str or bytes the caller gave). Text for messages: UTF-8 where it is,
// backslash escapes where a name's bytes are not.
py::bytes name_bytes(const std::string& name);
py::str text_of(const std::string& text);

// Seconds left of a validity; 0 when not held.
double seconds_left(std::chrono::steady_clock::time_point until);

// Semaphore: threading.Semaphore's shape. Each thread's permits are kept in
// the order taken; release() gives back the caller's latest, or, as
// threading.Semaphore allows, one another thread took.
struct PySemaphore {
    std::unique_ptr<Semaphore> semaphore;
    std::mutex mutex;
    std::map<std::thread::id, std::vector<Permit>> permits;

    void keep(Permit permit) {
        std::lock_guard lock(mutex);
        permits[std::this_thread::get_id()].push_back(std::move(permit));
    }
    Permit take() {
        std::lock_guard lock(mutex);
        auto mine = permits.find(std::this_thread::get_id());
        if (mine == permits.end() || mine->second.empty()) mine = permits.begin();
        while (mine != permits.end() && mine->second.empty()) ++mine;
        if (mine == permits.end()) return {};
        Permit permit = std::move(mine->second.back());
        mine->second.pop_back();
        return permit;
    }
    template <typename F>
    auto with_latest(F f) {
        std::lock_guard lock(mutex);
        auto mine = permits.find(std::this_thread::get_id());
        return f(mine == permits.end() || mine->second.empty() ? nullptr : &mine->second.back());
    }
    std::size_t count() {
        std::lock_guard lock(mutex);
        std::size_t n = 0;
        for (auto& [thread, list] : permits)
            for (auto& permit : list) n += permit.count();
        return n;
    }
};

void bind_kinds(py::module_& m);
void bind_async(py::module_& m);

}  // namespace dlock::python
