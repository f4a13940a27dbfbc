// What the files of Connection share (connection.cpp, connection_connect.cpp,
// connection_read.cpp, connection_write.cpp): the guard every I/O-thread
// handler runs in, and the guard around a caller's code.
#pragma once

#include <new>

#include "connection.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {

// Runs code of a caller (a completion, a listener); false when it threw.
template <typename Call>
bool ran_cleanly(Call&& call) noexcept {
    try {
        call();
        return true;
    } catch (...) {
        return false;
    }
}

// Every handler this connection runs on the I/O thread goes through here: an
// exception (bad_alloc while reading or building a reply, anything from a
// handshake step) fails the connection with an error code, as a read error
// would, instead of escaping the I/O thread.
template <typename Body>
void Connection::guarded(Body&& body) {
    try {
        body();
    } catch (const std::bad_alloc&) {
        lose(std::make_error_code(std::errc::not_enough_memory), "out of memory");
    } catch (const std::exception& e) {
        lose(errc::connection_lost, e.what());
    } catch (...) {
        lose(errc::connection_lost, "unknown exception");
    }
}

}  // namespace dlock::detail
