// Built against an installed dlock (find_package or pkg-config, shared or
// static). With --check it only proves, offline, that headers and library
// link, and that an exception thrown inside the library is caught here as
// dlock::Error (its type information crosses the library boundary); with a
// URL it takes and releases a lock on that server.
#include <dlock/async.hpp>
#include <dlock/client.hpp>
#include <dlock/error.hpp>
#include <dlock/lock.hpp>

#include <asio/use_future.hpp>
#include <iostream>
#include <string>

namespace {

int check() {
    std::error_code ec;
    dlock::ServerAddress::parse("not a uri", ec);
    if (ec != dlock::errc::invalid_uri) return 1;
    try {
        dlock::ServerAddress::parse("not a uri");
        return 1;
    } catch (const dlock::Error& e) {
        if (e.code() != dlock::errc::invalid_uri) return 1;
    }
    std::cout << "consumer: ok\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string arg = argc > 1 ? argv[1] : "--check";
    if (arg == "--check") return check();
    dlock::Client client(arg);
    auto lock = client.lock("consumer");
    lock.lock();
    std::cout << "consumer: locked, fencing token " << lock.fencing_token() << "\n";
    lock.unlock();
    // The asynchronous API links too (its templates call into the library).
    auto held = dlock::async_lock(lock, asio::use_future).get();
    std::cout << "consumer: async hold, fencing token " << held.fencing_token() << "\n";
    dlock::async_unlock(held, asio::use_future).get();
    return 0;
}
