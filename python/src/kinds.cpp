// The lock kinds: Lock, FairLock, Redlock, MultiLock share one set of
// methods (bind_exclusive); RwLock takes a side; Semaphore keeps the
// permits each thread took.
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "binding.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"


namespace dlock::python {
namespace {

std::chrono::milliseconds ms(double seconds) {
    return std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
}

template <typename Options>
Options options_of(double lease, bool renew, const py::object& on_lost) {
    Options options;
    options.lease = ms(lease);
    options.renew = renew;
    options.on_lost = on_lost_of(on_lost);
    return options;
}

// One attempt, a wait until a deadline, or a wait for ever, with the GIL
// released and Ctrl-C honoured (wait_interruptibly).
template <typename TryOnce, typename TryUntil, typename Forever, typename Undo>
bool acquire_with(bool blocking, double timeout, TryOnce once, TryUntil until, Forever forever, Undo undo) {
    const Deadline deadline = deadline_of(blocking, timeout);
    if (!blocking) {
        py::gil_scoped_release released;
        return once();
    }
    return wait_interruptibly(
        [&](std::stop_token stop) { return deadline ? until(*deadline, stop) : forever(stop); }, undo);
}

template <typename Release>
void release_with(const std::string& name, Release release) {
    std::error_code ec;
    {
        py::gil_scoped_release released;
        release(ec);
    }
    if (ec) throw_code(ec, "release of '" + name + "'");
}

template <typename Kind>
const std::string& self_name(const Kind& kind) {
    return kind.name();
}
template <>
const std::string& self_name(const MultiLock& kind) {
    return kind.names().front();
}

template <typename Kind, typename Class>
void bind_exclusive(Class& cls) {
    cls.def(
           "acquire",
           [](Kind& self, bool blocking, double timeout) {
               return acquire_with(
                   blocking, timeout, [&] { return self.try_lock(); },
                   [&](auto deadline, std::stop_token stop) { return self.try_lock_until(deadline, stop); },
                   [&](std::stop_token stop) { return self.lock(stop); }, [&] { self.unlock(); });
           },
           py::arg("blocking") = true, py::arg("timeout") = -1.0)
        .def("release",
             [](Kind& self) {
                 release_with(std::string(self_name(self)), [&](std::error_code& ec) { self.unlock(ec); });
             })
        .def_property_readonly("held", [](const Kind& self) { return self.is_held(); })
        .def_property_readonly("hold_count", [](const Kind& self) { return self.hold_count(); })
        .def_property_readonly("lost",
                               [](const Kind& self) {
                                   return LostEvent(self.lost_token(), [&self] { return self.lost_reason(); }, true);
                               }, py::keep_alive<0, 1>())
        .def_property_readonly("lost_reason", [](const Kind& self) { return reason_name(self.lost_reason()); })
        .def_property_readonly("valid_for", [](const Kind& self) { return seconds_left(self.valid_until()); });
    if constexpr (std::is_same_v<Kind, MultiLock>) {
        cls.def_property_readonly("fencing_tokens", [](const Kind& self) {
            py::dict out;
            for (const auto& [name, token] : self.fencing_tokens()) out[name_bytes(name)] = token;
            return out;
        });
        cls.def_property_readonly("names", [](const Kind& self) {
            py::list out;
            for (const auto& name : self.names()) out.append(name_bytes(name));
            return out;
        });
    } else {
        cls.def_property_readonly("fencing_token", [](const Kind& self) { return self.fencing_token(); });
        cls.def_property_readonly("name", [](const Kind& self) { return name_bytes(self.name()); });
    }
}

}  // namespace

void bind_kinds(py::module_& m) {
    py::class_<Lock, Holder<Lock>> lock(m, "Lock");
    lock.def(py::init([](PyClient& client, std::string name, double lease, bool renew, py::object on_lost) {
                 return Holder<Lock>(new Lock(client.get(), std::move(name),
                                              options_of<LockOptions>(lease, renew, on_lost)));
             }),
             py::arg("client"), py::arg("name"), py::arg("lease"), py::arg("renew"), py::arg("on_lost"),
             py::keep_alive<1, 2>());
    bind_exclusive<Lock>(lock);

    py::class_<FairLock, Holder<FairLock>> fair(m, "FairLock");
    fair.def(py::init([](PyClient& client, std::string name, double lease, bool renew, py::object on_lost) {
                 return Holder<FairLock>(new FairLock(client.get(), std::move(name),
                                                      options_of<LockOptions>(lease, renew, on_lost)));
             }),
             py::arg("client"), py::arg("name"), py::arg("lease"), py::arg("renew"), py::arg("on_lost"),
             py::keep_alive<1, 2>());
    bind_exclusive<FairLock>(fair);

    py::class_<MultiLock, Holder<MultiLock>> multi(m, "MultiLock");
    multi.def(py::init([](PyClient& client, std::vector<std::string> names, double lease, bool renew,
                          py::object on_lost) {
                  return Holder<MultiLock>(new MultiLock(client.get(), std::move(names),
                                                         options_of<LockOptions>(lease, renew, on_lost)));
              }),
              py::arg("client"), py::arg("names"), py::arg("lease"), py::arg("renew"), py::arg("on_lost"),
              py::keep_alive<1, 2>());
    bind_exclusive<MultiLock>(multi);

    py::class_<PyMasters, Holder<PyMasters>> masters_class(m, "Masters");
    PyMasters::bind(masters_class);
    masters_class
        .def(py::init([](const std::vector<std::string>& urls, double connect_timeout, double command_timeout) {
                 ClientOptions options;
                 options.connect_timeout = ms(connect_timeout);
                 options.command_timeout = ms(command_timeout);
                 Holder<PyMasters> masters(new PyMasters);
                 masters->object = std::make_unique<Masters>(urls, std::move(options));
                 return masters;
             }),
             py::arg("urls"), py::arg("connect_timeout"), py::arg("command_timeout"))
        .def_property_readonly("size", [](const PyMasters& self) { return self.get().size(); })
        .def_property_readonly("quorum", [](const PyMasters& self) { return self.get().quorum(); });

    py::class_<Redlock, Holder<Redlock>> redlock(m, "Redlock");
    redlock.def(py::init([](PyMasters& masters, std::string name, double lease, bool renew, py::object on_lost) {
                    return Holder<Redlock>(new Redlock(masters.get(), std::move(name),
                                                       options_of<RedlockOptions>(lease, renew, on_lost)));
                }),
                py::arg("masters"), py::arg("name"), py::arg("lease"), py::arg("renew"), py::arg("on_lost"),
                py::keep_alive<1, 2>());
    bind_exclusive<Redlock>(redlock);

    py::class_<RwLock, Holder<RwLock>>(m, "RwLock")
        .def(py::init([](PyClient& client, std::string name, double lease, bool renew, py::object on_lost,
                         bool prefer_readers) {
                 auto options = options_of<RwLockOptions>(lease, renew, on_lost);
                 options.prefer_readers = prefer_readers;
                 return Holder<RwLock>(new RwLock(client.get(), std::move(name), std::move(options)));
             }),
             py::arg("client"), py::arg("name"), py::arg("lease"), py::arg("renew"), py::arg("on_lost"),
             py::arg("prefer_readers"), py::keep_alive<1, 2>())
        .def(
            "acquire",
            [](RwLock& self, bool shared, bool blocking, double timeout) {
                if (shared)
                    return acquire_with(
                        blocking, timeout, [&] { return self.try_lock_shared(); },
                        [&](auto deadline, std::stop_token stop) { return self.try_lock_shared_until(deadline, stop); },
                        [&](std::stop_token stop) { return self.lock_shared(stop); }, [&] { self.unlock_shared(); });
                return acquire_with(
                    blocking, timeout, [&] { return self.try_lock(); },
                    [&](auto deadline, std::stop_token stop) { return self.try_lock_until(deadline, stop); },
                    [&](std::stop_token stop) { return self.lock(stop); }, [&] { self.unlock(); });
            },
            py::arg("shared"), py::arg("blocking") = true, py::arg("timeout") = -1.0)
        .def("release",
             [](RwLock& self, bool shared) {
                 release_with(self.name(), [&](std::error_code& ec) {
                     shared ? self.unlock_shared(ec) : self.unlock(ec);
                 });
             },
             py::arg("shared"))
        .def("held", [](const RwLock& self, bool shared) { return shared ? self.is_held_shared() : self.is_held(); })
        .def("hold_count",
             [](const RwLock& self, bool shared) { return shared ? self.shared_hold_count() : self.hold_count(); })
        .def("fencing_token",
             [](const RwLock& self, bool shared) {
                 return shared ? self.shared_fencing_token() : self.fencing_token();
             })
        .def("lost_reason",
             [](const RwLock& self, bool shared) {
                 return reason_name(shared ? self.shared_lost_reason() : self.lost_reason());
             })
        .def("valid_for",
             [](const RwLock& self, bool shared) {
                 return seconds_left(shared ? self.shared_valid_until() : self.valid_until());
             })
        .def(
            "lost",
            [](const RwLock& self, bool shared) {
                if (shared)
                    return LostEvent(self.shared_lost_token(), [&self] { return self.shared_lost_reason(); }, true);
                return LostEvent(self.lost_token(), [&self] { return self.lost_reason(); }, true);
            },
            py::keep_alive<0, 1>())
        .def_property_readonly("name", [](const RwLock& self) { return name_bytes(self.name()); });

    py::class_<PySemaphore, Holder<PySemaphore>>(m, "Semaphore")
        .def(py::init([](PyClient& client, std::string name, unsigned limit, double lease, bool renew,
                         py::object on_lost) {
                 auto options = options_of<SemaphoreOptions>(lease, renew, on_lost);
                 options.limit = limit;
                 Holder<PySemaphore> semaphore(new PySemaphore);
                 semaphore->semaphore = std::make_unique<Semaphore>(client.get(), std::move(name), std::move(options));
                 return semaphore;
             }),
             py::arg("client"), py::arg("name"), py::arg("limit"), py::arg("lease"), py::arg("renew"),
             py::arg("on_lost"), py::keep_alive<1, 2>())
        .def(
            "acquire",
            [](PySemaphore& self, bool blocking, double timeout, unsigned k) {
                Semaphore& s = *self.semaphore;
                Permit permit;
                const bool got = acquire_with(
                    blocking, timeout, [&] { return bool(permit = s.try_acquire(k)); },
                    [&](auto deadline, std::stop_token stop) {
                        return bool(permit = s.try_acquire_until(deadline, k, stop));
                    },
                    [&](std::stop_token stop) { return bool(permit = s.acquire(k, stop)); },
                    [&] { permit = Permit(); });
                if (got) self.keep(std::move(permit));
                return got;
            },
            py::arg("blocking") = true, py::arg("timeout") = -1.0, py::arg("k") = 1u)
        .def("release",
             [](PySemaphore& self) {
                 Permit permit = self.take();
                 if (!permit)
                     throw_code(make_error_code(errc::not_owner),
                                "release of semaphore '" + self.semaphore->name() + "': no permit held");
                 release_with(self.semaphore->name(), [&](std::error_code& ec) { permit.release(ec); });
             })
        .def_property_readonly("held",
                               [](PySemaphore& self) {
                                   return self.with_latest([](Permit* p) { return p && p->is_held(); });
                               })
        .def_property_readonly("permits_held", &PySemaphore::count)
        .def_property_readonly("lost",
                               [](PySemaphore& self) {
                                   // The caller's latest permit now; the query asks again (a permit moves
                                   // in its list, so the event keeps no pointer to it).
                                   auto token = self.with_latest(
                                       [](Permit* p) { return p ? p->lost_token() : std::stop_token{}; });
                                   return LostEvent(
                                       std::move(token),
                                       [&self] {
                                           return self.with_latest(
                                               [](Permit* p) { return p ? p->lost_reason() : std::nullopt; });
                                       },
                                       true);
                               }, py::keep_alive<0, 1>())
        .def_property_readonly("lost_reason",
                               [](PySemaphore& self) {
                                   return self.with_latest(
                                       [](Permit* p) { return reason_name(p ? p->lost_reason() : std::nullopt); });
                               })
        .def_property_readonly("valid_for",
                               [](PySemaphore& self) {
                                   return self.with_latest(
                                       [](Permit* p) { return p ? seconds_left(p->valid_until()) : 0.0; });
                               })
        .def_property_readonly("name", [](PySemaphore& self) { return name_bytes(self.semaphore->name()); })
        .def("set_limit", [](PySemaphore& self, unsigned limit) {
            Semaphore& s = *self.semaphore;
            py::gil_scoped_release released;
            return s.set_limit(limit);
        });
}

}  // namespace dlock::python
