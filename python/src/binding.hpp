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
#include "dlock/semaphore.hpp"
#include "holder.hpp"

namespace py = pybind11;

namespace dlock::python {

// A Client that Python may close before the objects made through it go.
struct PyClient {
    std::unique_ptr<Client> client;
    Client& get() const;
};

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

// lock.lost: whether the caller's hold was lost, as a threading.Event.
struct LostEvent {
    std::stop_token token;
    std::function<std::optional<LostReason>()> reason;
    bool is_set() const { return token.stop_requested(); }
    bool wait(std::optional<double> timeout) const;
};

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
