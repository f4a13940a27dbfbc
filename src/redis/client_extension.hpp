// A typed slot in the client core for a layer above the transport: the lock
// service keeps its per-client state (owner ids, holds, their renewal) in
// one, made on first use and destroyed with the core. The transport knows
// only the base class below; it never names the layers above it.
#pragma once

#include <concepts>
#include <map>
#include <memory>
#include <mutex>
#include <typeindex>
#include <typeinfo>
#include <utility>

namespace dlock::detail {

class ClientExtension {
public:
    virtual ~ClientExtension() = default;
};

// At most one extension of each type per client.
class ClientExtensions {
public:
    // The client's T, made by make() on the first call (under a lock: a
    // second caller waits for the first one's T); kept until the core goes.
    // A make() that throws leaves the slot empty for the next call.
    template <std::derived_from<ClientExtension> T, std::invocable Make>
    std::shared_ptr<T> get(Make&& make) {
        std::lock_guard lock(mutex_);
        auto& slot = slots_[std::type_index(typeid(T))];
        if (!slot) slot = std::forward<Make>(make)();
        // Keyed by T, so what the slot holds is a T.
        return std::static_pointer_cast<T>(slot);
    }

private:
    std::mutex mutex_;
    std::map<std::type_index, std::shared_ptr<ClientExtension>> slots_;
};

}  // namespace dlock::detail
