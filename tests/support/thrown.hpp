// The dlock::Error a call threw, as tests look at it: its code and its
// what(); both empty when the call returned.
#pragma once

#include <string>
#include <system_error>

#include "dlock/error.hpp"

namespace dlock::support {

struct Thrown {
    std::error_code code;
    std::string what;
};

template <class Call>
Thrown thrown_by(Call&& call) {
    try {
        static_cast<void>(call());
    } catch (const dlock::Error& e) {
        return {e.code(), e.what()};
    }
    return {};
}

}  // namespace dlock::support
