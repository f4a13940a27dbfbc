// A client's first subscribe() racing its close: every Subscriber made is
// shut down with its client.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "redis/client_core.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;

namespace {

// A ClientOptions::on_warning whose copy, on one chosen thread once armed,
// says so and then sleeps: the first subscribe() copies the client's options
// for its Subscriber, and this holds it there while the client closes, so
// that the race is met every time rather than once in many runs.
struct SlowCopyState {
    std::atomic<bool> armed{false};
    std::thread::id victim;
    std::promise<void> in_copy;
    std::atomic<bool> told{false};
};

struct SlowCopy {
    std::shared_ptr<SlowCopyState> state;
    explicit SlowCopy(std::shared_ptr<SlowCopyState> s) : state(std::move(s)) {}
    SlowCopy(SlowCopy&&) noexcept = default;
    SlowCopy(const SlowCopy& other) : state(other.state) {
        if (state && state->armed.load() && std::this_thread::get_id() == state->victim &&
            !state->told.exchange(true)) {
            state->in_copy.set_value();
            std::this_thread::sleep_for(400ms);
        }
    }
    void operator()(std::string_view) const {}
};

}  // namespace

// The close either finds the Subscriber the first subscribe() made and shuts
// it down (its Subscription is inert), or comes first and the subscribe()
// fails with client_closed. Never a Subscriber left running on the closed
// client's I/O context: its Subscription would wait out wait_active's whole
// deadline, and destroying it after the core would touch the freed context.
// Reached through the core (kept alive here) so that the test does nothing
// undefined with the Client object itself.
TEST(SubscriberClose, AFirstSubscribeRacingTheClientsCloseIsShutDownOrRefused) {
    dlock::support::RedisServer server;
    auto slow = std::make_shared<SlowCopyState>();
    dlock::ClientOptions options;
    options.on_warning = SlowCopy(slow);
    std::optional<dlock::Client> client(std::in_place, server.uri(), options);
    client->wait_connected();
    std::shared_ptr<dlock::detail::ClientCore> core = client->core();

    std::promise<std::optional<dlock::Subscription>> made;
    std::error_code refused;
    auto in_copy = slow->in_copy.get_future();
    std::promise<void> armed;
    std::thread subscriber([&, go = armed.get_future()]() mutable {
        go.wait();
        try {
            made.set_value(core->subscribe("raced", [](dlock::Subscription::Event, std::string_view) {}));
        } catch (const dlock::Error& e) {
            refused = e.code();
            made.set_value(std::nullopt);
        }
    });
    slow->victim = subscriber.get_id();
    slow->armed = true;
    armed.set_value();
    // The subscribe() is now past its first check of the client: close it meanwhile.
    const bool in_window = in_copy.wait_for(5s) == std::future_status::ready;
    client.reset();
    subscriber.join();
    ASSERT_TRUE(in_window) << "the first subscribe() did not copy the options (the test misses its window)";
    auto subscription = made.get_future().get();
    if (!subscription) {
        EXPECT_EQ(refused, dlock::errc::client_closed);
        return;
    }
    EXPECT_FALSE(subscription->active());
    const auto asked = std::chrono::steady_clock::now();
    EXPECT_FALSE(subscription->wait_active(asked + 3s));
    const auto waited = std::chrono::steady_clock::now() - asked;
    EXPECT_LT(waited, 1s) << "wait_active waited "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
                          << " ms for a client that is gone: its Subscriber was never shut down";
    // The Subscription outlives the core, and with it the I/O context.
    core.reset();
    subscription.reset();
}
