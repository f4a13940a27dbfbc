// dlock._dlock: the native half of the Python module (python/dlock/ is the
// other). Client, errors, the interruptible wait and the loss event here;
// the lock kinds in kinds.cpp, asyncio's side in async.cpp.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <condition_variable>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "binding.hpp"
#include "dispatch.hpp"
#include "dlock/lock.hpp"

namespace dlock::python {
namespace {

// errc's enumerators by name: the Python side makes one exception class of
// each (python/dlock/_errors.py).
const std::vector<std::pair<const char*, errc>> errc_names = {
    {"invalid_argument", errc::invalid_argument}, {"invalid_uri", errc::invalid_uri},
    {"connect_timeout", errc::connect_timeout}, {"connection_refused", errc::connection_refused},
    {"resolve_failed", errc::resolve_failed}, {"tls_error", errc::tls_error}, {"auth_failed", errc::auth_failed},
    {"not_connected", errc::not_connected}, {"command_timeout", errc::command_timeout},
    {"connection_lost", errc::connection_lost}, {"protocol_error", errc::protocol_error},
    {"reply_too_large", errc::reply_too_large}, {"server_error", errc::server_error},
    {"permission_denied", errc::permission_denied}, {"wrong_type", errc::wrong_type},
    {"no_script", errc::no_script}, {"client_closed", errc::client_closed}, {"forked_child", errc::forked_child},
    {"not_owner", errc::not_owner}, {"lease_lost", errc::lease_lost}, {"no_quorum", errc::no_quorum},
    {"replicas_not_acknowledged", errc::replicas_not_acknowledged}, {"no_master", errc::no_master},
    {"not_master", errc::not_master}, {"cluster_down", errc::cluster_down},
    {"slot_migrating", errc::slot_migrating}, {"lease_expired", errc::lease_expired},
    {"lock_revoked", errc::lock_revoked}, {"lock_taken_over", errc::lock_taken_over},
    {"renewal_refused", errc::renewal_refused}, {"kind_mismatch", errc::kind_mismatch},
    {"limit_mismatch", errc::limit_mismatch}, {"layout_mismatch", errc::layout_mismatch},
};

// Set by python/dlock/_errors.py at import: {errc value: class}, and the base.
py::dict* error_classes = nullptr;
py::object* error_base = nullptr;
unsigned long main_thread_ident = 0;

const char* errc_name(int value) {
    for (const auto& [name, e] : errc_names)
        if (static_cast<int>(e) == value) return name;
    return "error";
}

// Signals Python handles reach a waiting main thread through Python's wakeup
// fd (signal.set_wakeup_fd), installed for the wait only and pointed at this
// pipe; a thread of our own reads it and requests the wait's stop. The fd
// that was installed before (asyncio's) is put back after, and the signal
// bytes the wait took are passed on to it.
class SignalWatch {
public:
    static SignalWatch& get() {
        static SignalWatch* watch = nullptr;
        if (!watch || watch->pid_ != getpid()) watch = new SignalWatch;  // a fork's child starts its own
        return *watch;
    }

    // GIL held. Returns the fd installed before.
    int begin(std::stop_source* stop) {
        {
            std::lock_guard lock(mutex_);
            current_ = stop;
            received_.clear();
        }
        return set_wakeup_fd(write_);
    }
    // GIL held. True when a signal arrived during the wait.
    bool finish(int previous) {
        set_wakeup_fd(previous);
        std::string bytes;
        {
            std::lock_guard lock(mutex_);
            drain_locked();
            current_ = nullptr;
            bytes.swap(received_);
        }
        if (previous >= 0 && !bytes.empty()) (void)!::write(previous, bytes.data(), bytes.size());
        return !bytes.empty();
    }

private:
    SignalWatch() : pid_(getpid()) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
        read_ = fds[0];
        write_ = fds[1];
        std::thread([this] {
            for (;;) {
                pollfd p{read_, POLLIN, 0};
                if (::poll(&p, 1, -1) < 0) continue;
                std::lock_guard lock(mutex_);
                drain_locked();
            }
        }).detach();
    }
    static int set_wakeup_fd(int fd) {
        // Never released: a static py::object would be dropped after the interpreter is gone.
        static py::object* setter = new py::object(py::module_::import("signal").attr("set_wakeup_fd"));
        return (*setter)(fd, py::arg("warn_on_full_buffer") = false).cast<int>();
    }
    void drain_locked() {
        char buffer[64];
        ssize_t n;
        while ((n = ::read(read_, buffer, sizeof buffer)) > 0) {
            received_.append(buffer, static_cast<std::size_t>(n));
            if (current_) current_->request_stop();
        }
    }

    pid_t pid_;
    int read_ = -1;
    int write_ = -1;
    std::mutex mutex_;
    std::stop_source* current_ = nullptr;
    std::string received_;
};

}  // namespace

Deadline deadline_of(bool blocking, double timeout) {
    if (!blocking) {
        if (timeout != -1) throw py::value_error("can't specify a timeout for a non-blocking call");
        return std::chrono::steady_clock::time_point::min();
    }
    if (timeout == -1) return std::nullopt;
    if (timeout < 0 || std::isnan(timeout)) throw py::value_error("timeout value must be a non-negative number");
    return deadline_in(timeout);
}

Deadline deadline_in(std::optional<double> seconds) {
    if (!seconds || *seconds < 0) return std::nullopt;
    // Past a day in seconds the wait is as good as unbounded; keeps the sum in range.
    const double s = std::min(*seconds, 1e9);
    return std::chrono::steady_clock::now() +
           std::chrono::ceil<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

bool wait_interruptibly(const std::function<bool(std::stop_token)>& attempt, const std::function<void()>& undo) {
    if (PyThread_get_thread_ident() != main_thread_ident) {
        py::gil_scoped_release released;
        return attempt({});
    }
    auto& watch = SignalWatch::get();
    for (;;) {
        std::stop_source stop;
        const int previous = watch.begin(&stop);
        bool acquired = false;
        try {
            py::gil_scoped_release released;
            acquired = attempt(stop.get_token());
        } catch (...) {
            watch.finish(previous);
            throw;
        }
        if (!watch.finish(previous)) return acquired;
        if (PyErr_CheckSignals() != 0) {
            if (acquired) {
                // Give back what the attempt won as the signal came: the
                // caller sees the exception, so nothing may stay held.
                py::error_already_set pending;  // keeps the exception while undo runs
                {
                    py::gil_scoped_release released;
                    undo();
                }
                throw pending;
            }
            throw py::error_already_set();
        }
        if (acquired) return true;
    }
}

py::object error_object(std::error_code ec, const std::string& detail) {
    std::string message = detail.empty() ? ec.message() : detail + ": " + ec.message();
    const std::string server = last_server_error();
    if (!server.empty() && message.find(server) == std::string::npos) message += " (" + server + ")";
    py::object cls = *error_base;
    if (ec.category() == error_category() && error_classes->contains(py::int_(ec.value())))
        cls = (*error_classes)[py::int_(ec.value())];
    py::object error = cls(text_of(message));
    error.attr("code") = ec.category() == error_category() ? py::str(errc_name(ec.value())) : text_of(ec.message());
    return error;
}

[[noreturn]] void throw_code(std::error_code ec, const std::string& detail) {
    // Raised from here, not through dlock::Error's what(): a name's NUL
    // byte would end that C string.
    py::object error = error_object(ec, detail);
    PyErr_SetObject(error.get_type().ptr(), error.ptr());
    throw py::error_already_set();
}

py::object reason_name(std::optional<LostReason> reason) {
    if (!reason) return py::none();
    return py::str(std::string(to_string(*reason)));
}

std::function<void(std::string_view, std::error_code)> on_lost_of(const py::object& callable) {
    std::shared_ptr<PyRef> ref;
    if (!callable.is_none()) {
        if (!PyCallable_Check(callable.ptr())) throw py::type_error("on_lost must be callable or None");
        ref = std::make_shared<PyRef>(callable.ptr());
    }
    // Always one, callable or not: it settles the reason of the lost events
    // (LostEvent) the loss set a moment before.
    return [ref](std::string_view, std::error_code reason) {
        auto why = lost_reason_of(reason);
        LostEvent::settle_noted(why);
        if (!ref) return;
        post([ref, why] {
            py::handle function(ref->get());
            try {
                function(reason_name(why));
            } catch (py::error_already_set& e) {
                e.discard_as_unraisable("dlock on_lost callback");
            }
        });
    };
}

double seconds_left(std::chrono::steady_clock::time_point until) {
    if (until == std::chrono::steady_clock::time_point{}) return 0.0;
    const auto left = until - std::chrono::steady_clock::now();
    return left.count() > 0 ? std::chrono::duration<double>(left).count() : 0.0;
}

namespace {

py::object reply_to_python(const Reply& reply) {
    switch (reply.kind) {
    case Reply::Kind::nil: return py::none();
    case Reply::Kind::status: return py::str(reply.text);
    case Reply::Kind::error: return py::str(reply.text);
    case Reply::Kind::integer: return py::int_(reply.integer);
    case Reply::Kind::string: return py::bytes(reply.text);
    case Reply::Kind::array: {
        py::list out;
        for (const auto& element : reply.elements) out.append(reply_to_python(element));
        return py::object(out);
    }
    }
    return py::none();
}

py::dict info_to_python(const LockInfo& info) {
    static const char* kinds[] = {"free", "exclusive", "shared", "semaphore"};
    py::dict out;
    out["kind"] = kinds[static_cast<int>(info.kind)];
    out["held"] = info.held;
    out["owner"] = info.owner;
    out["holder"] = info.holder;
    out["hold_count"] = info.hold_count;
    out["ttl"] = std::chrono::duration<double>(info.ttl).count();
    out["fencing_token"] = info.fencing_token;
    out["last_fencing_token"] = info.last_fencing_token;
    out["readers"] = info.readers.size();
    out["waiters"] = info.waiters + info.semaphore.waiting;  // a lock's line, or a semaphore's
    out["permits_used"] = info.semaphore.used;
    out["permit_limit"] = info.semaphore.limit;
    return out;
}

}  // namespace

}  // namespace dlock::python

PYBIND11_MODULE(_dlock, m) {
    using namespace dlock::python;
    using dlock::Client;
    m.doc() = "The native half of dlock's Python module (see the dlock package).";

    main_thread_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

    py::dict codes;
    for (const auto& [name, value] : errc_names) codes[name] = static_cast<int>(value);
    m.attr("ERRC") = codes;
    m.def("_register_errors", [](py::dict classes, py::object base) {
        error_classes = new py::dict(std::move(classes));
        error_base = new py::object(std::move(base));
    });
    py::register_exception_translator([](std::exception_ptr p) {
        if (!p || !error_base) return;
        try {
            std::rethrow_exception(p);
        } catch (const std::system_error& e) {
            // dlock::Error keeps its detail and Redis's text in what().
            py::object error = error_object(e.code(), "");
            error.attr("args") = py::make_tuple(text_of(e.what()));
            PyErr_SetObject(error.get_type().ptr(), error.ptr());
        }
    });

    m.def("_shutdown", &shutdown, "Stops the dispatch thread (atexit).");
    m.def("_after_fork_in_child", [] {
        after_fork_in_child();
        main_thread_ident = PyThread_get_thread_ident();
    });

    py::class_<PyClient, Holder<PyClient>> client_class(m, "Client");
    PyClient::bind(client_class);
    client_class
        .def(py::init([](const std::string& url, double connect_timeout, double command_timeout,
                         const std::string& client_name) {
                 dlock::ClientOptions options;
                 auto ms = [](double s) {
                     return std::chrono::milliseconds(static_cast<long long>(std::ceil(s * 1000.0)));
                 };
                 options.connect_timeout = ms(connect_timeout);
                 options.command_timeout = ms(command_timeout);
                 options.client_name = client_name;
                 Holder<PyClient> client(new PyClient);
                 client->object = std::make_unique<Client>(url, std::move(options));
                 return client;
             }),
             py::arg("url"), py::arg("connect_timeout"), py::arg("command_timeout"), py::arg("client_name"))
        .def_property_readonly("address", [](const PyClient& self) { return self.get().address().to_string(); })
        .def("wait_connected",
             [](PyClient& self) {
                 Client& client = self.get();
                 py::gil_scoped_release released;
                 client.wait_connected();
             })
        .def("command",
             [](PyClient& self, const std::vector<std::string>& args) {
                 Client& client = self.get();
                 std::vector<std::string_view> views(args.begin(), args.end());
                 dlock::Reply reply;
                 {
                     py::gil_scoped_release released;
                     reply = client.command(Client::Args(views));
                 }
                 return reply_to_python(reply);
             })
        .def("inspect",
             [](PyClient& self, const std::string& name) {
                 Client& client = self.get();
                 dlock::LockInfo info;
                 {
                     py::gil_scoped_release released;
                     info = dlock::inspect_lock(client, name);
                 }
                 return info_to_python(info);
             })
        .def("force_release", [](PyClient& self, const std::string& name, bool all) -> py::object {
            Client& client = self.get();
            dlock::ForceRelease result;
            {
                py::gil_scoped_release released;
                result = dlock::force_release(client, name, dlock::ForceReleaseOptions{.all = all});
            }
            if (result.refused) {
                std::string holds;
                for (const auto& b : result.would_break) holds += (holds.empty() ? "" : ", ") + b.holder;
                throw dlock::Error(make_error_code(dlock::errc::invalid_argument),
                                   "force_release('" + name + "'): several holds (" + holds + "); pass all=True");
            }
            py::list broken;
            for (const auto& b : result.broken) broken.append(b.holder);
            return py::object(broken);
        }, py::arg("name"), py::arg("all") = false);

    py::class_<LostEvent>(m, "LostEvent")
        .def("is_set", &LostEvent::is_set)
        .def("wait", &LostEvent::wait, py::arg("timeout") = py::none())
        .def_property_readonly("reason", [](const LostEvent& self) { return reason_name(self.reason()); });

    bind_kinds(m);
    bind_async(m);
}
