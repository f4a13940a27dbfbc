// asyncio's side: each kind's asynchronous acquisition (dlock/async.hpp,
// async_entry) with its completion posted to the dispatch thread, which
// hands it to the Python callback; python/dlock/_aio.py puts it on the
// running loop with call_soon_threadsafe. A Canceller requests the
// operation's stop: the waiter leaves its place, and the operation
// completes as aborted holding nothing (or, if the grant won the race, with
// a hold the Python side drops: it is released in the background).
#include <asio/error.hpp>

#include "binding.hpp"
#include "dispatch.hpp"
#include "dlock/async.hpp"
#include "dlock/fair_lock.hpp"

namespace dlock::python {
namespace {

struct Canceller {
    std::stop_source stop;
};

std::optional<std::chrono::steady_clock::time_point> async_deadline(bool blocking, std::optional<double> timeout) {
    if (!blocking) return std::chrono::steady_clock::time_point::min();
    return deadline_in(timeout);
}

py::object completion_error(std::error_code ec) {
    if (!ec) return py::none();
    if (ec == asio::error::operation_aborted) return py::str("cancelled");
    return error_object(ec, "");
}

// done(error or None or "cancelled", AsyncHold or None), on the dispatch thread.
async_entry::AcquireCompletion acquire_completion(const py::object& done) {
    auto ref = std::make_shared<PyRef>(done.ptr());
    return [ref](std::error_code ec, AsyncHold hold) {
        auto held = std::make_shared<AsyncHold>(std::move(hold));
        post([ref, ec, held] {
            py::object hold_object = *held ? py::cast(std::move(*held)) : py::none();
            try {
                py::handle(ref->get())(completion_error(ec), hold_object);
            } catch (py::error_already_set& e) {
                e.discard_as_unraisable("dlock asynchronous completion");
            }
        });
    };
}

template <typename Start>
Canceller start(Start start_operation) {
    Canceller canceller;
    start_operation(canceller.stop);
    return canceller;
}

}  // namespace

void bind_async(py::module_& m) {
    py::class_<Canceller>(m, "Canceller").def("cancel", [](Canceller& self) { self.stop.request_stop(); });

    py::class_<AsyncHold>(m, "AsyncHold")
        .def("__bool__", [](const AsyncHold& self) { return bool(self); })
        .def_property_readonly("held", &AsyncHold::is_held)
        .def_property_readonly("fencing_token", &AsyncHold::fencing_token)
        .def_property_readonly("fencing_tokens",
                               [](const AsyncHold& self) {
                                   py::dict out;
                                   for (const auto& [name, token] : self.fencing_tokens())
                                       out[name_bytes(name)] = token;
                                   return out;
                               })
        .def_property_readonly("lost",
                               [](const AsyncHold& self) {
                                   return LostEvent(self.lost_token(), [&self] { return self.lost_reason(); }, false);
                               },
                               py::keep_alive<0, 1>())
        .def_property_readonly("lost_reason", [](const AsyncHold& self) { return reason_name(self.lost_reason()); })
        .def_property_readonly("valid_for", [](const AsyncHold& self) { return seconds_left(self.valid_until()); })
        .def_property_readonly("name", [](const AsyncHold& self) { return name_bytes(self.name()); })
        .def("start_release", [](AsyncHold& self, py::object done) {
            auto ref = std::make_shared<PyRef>(done.ptr());
            async_entry::start_release(std::move(self), [ref](std::error_code ec) {
                post([ref, ec] {
                    try {
                        py::handle(ref->get())(completion_error(ec));
                    } catch (py::error_already_set& e) {
                        e.discard_as_unraisable("dlock asynchronous release");
                    }
                });
            });
        })
        .def("drop", [](AsyncHold& self) { AsyncHold dropped = std::move(self); });

    auto exclusive = [&m]<typename Kind>(Kind*) {
        m.def(
            "start_acquire",
            [](Kind& lock, bool blocking, std::optional<double> timeout, py::object done) {
                return start([&](std::stop_source stop) {
                    async_entry::start_acquire(lock, async_deadline(blocking, timeout), stop, acquire_completion(done));
                });
            },
            py::arg("lock"), py::arg("blocking"), py::arg("timeout"), py::arg("done"));
    };
    exclusive(static_cast<Lock*>(nullptr));
    exclusive(static_cast<FairLock*>(nullptr));
    exclusive(static_cast<MultiLock*>(nullptr));
    exclusive(static_cast<Redlock*>(nullptr));
    m.def(
        "start_acquire",
        [](RwLock& lock, bool shared, bool blocking, std::optional<double> timeout, py::object done) {
            return start([&](std::stop_source stop) {
                async_entry::start_acquire(lock, shared, async_deadline(blocking, timeout), stop,
                                           acquire_completion(done));
            });
        },
        py::arg("lock"), py::arg("shared"), py::arg("blocking"), py::arg("timeout"), py::arg("done"));
    m.def(
        "start_acquire",
        [](PySemaphore& semaphore, unsigned k, bool blocking, std::optional<double> timeout, py::object done) {
            return start([&](std::stop_source stop) {
                async_entry::start_acquire(*semaphore.semaphore, k, async_deadline(blocking, timeout), stop,
                                           acquire_completion(done));
            });
        },
        py::arg("semaphore"), py::arg("k"), py::arg("blocking"), py::arg("timeout"), py::arg("done"));
}

}  // namespace dlock::python
