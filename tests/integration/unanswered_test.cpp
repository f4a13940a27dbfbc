// A server that stops answering lock scripts (CLIENT PAUSE WRITE): every
// call that could not ask it says so, also after an earlier call of the same
// owner was left unanswered (its gate still held), in every kind; and a
// Client closes within its documented bound whatever was left unanswered.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;
using dlock::support::RedisServer;

namespace {

// Scripts (writes) wait while reads and the handshake still get answers.
void pause_scripts(const RedisServer& server, std::chrono::milliseconds how_long) {
    server.cli({"CLIENT", "PAUSE", std::to_string(how_long.count()), "WRITE"});
}

// One bounded try of a kind (throwing form): its result, or its error in ec.
using Try = std::function<bool()>;

void every_try_reports_that_it_could_not_ask(const std::string& kind, const Try& bounded_try) {
    auto attempt = [&](std::error_code& ec) {
        try {
            return bounded_try();
        } catch (const dlock::Error& e) {
            ec = e.code();
            return false;
        }
    };
    std::error_code ec;
    const auto started = Clock::now();
    EXPECT_FALSE(attempt(ec)) << kind;
    EXPECT_EQ(ec, dlock::errc::command_timeout) << kind << ": " << ec.message();
    // The same owner again, its earlier call still unanswered: not contention.
    for (int i = 0; i < 2; ++i) {
        ec.clear();
        EXPECT_FALSE(attempt(ec)) << kind;
        EXPECT_EQ(ec, dlock::errc::command_timeout) << kind << " (call " << i + 2 << "): " << ec.message();
    }
    EXPECT_LT(Clock::now() - started, 2500ms) << kind << ": three tries of 200 ms took too long";
}

}  // namespace

TEST(Unanswered, LaterCallsOfTheSameOwnerReportTheOutageNotContention) {
    RedisServer server;
    dlock::Client client(server.uri());
    dlock::Lock lock(client, "unanswered:lock");
    dlock::FairLock fair(client, "unanswered:fair");
    dlock::RwLock rw(client, "unanswered:rw");
    dlock::RwLock readers(client, "unanswered:read");
    dlock::Semaphore semaphore(client, "unanswered:sem", {.limit = 2});
    dlock::MultiLock multi(client, {"unanswered:m1", "unanswered:m2"});
    pause_scripts(server, 20000ms);  // ended below by CLIENT UNPAUSE
    every_try_reports_that_it_could_not_ask("Lock", [&] { return lock.try_lock_for(200ms); });
    every_try_reports_that_it_could_not_ask("FairLock", [&] { return fair.try_lock_for(200ms); });
    every_try_reports_that_it_could_not_ask("RwLock write", [&] { return rw.try_lock_for(200ms); });
    every_try_reports_that_it_could_not_ask("RwLock read", [&] { return readers.try_lock_shared_for(200ms); });
    every_try_reports_that_it_could_not_ask("Semaphore", [&] { return static_cast<bool>(semaphore.try_acquire_for(200ms)); });
    every_try_reports_that_it_could_not_ask("MultiLock", [&] { return multi.try_lock_for(200ms); });
    server.cli({"CLIENT", "UNPAUSE"});
    // Once the server answers again, the owner's calls go through.
    EXPECT_TRUE(eventually(
        [&] {
            try {
                return lock.try_lock_for(200ms);
            } catch (const dlock::Error&) {
                return false;
            }
        },
        15s));
    lock.unlock();
}

// Closing a Client whose acquisitions were left unanswered takes at most
// Client::max_close_wait (plus a moment), not a command timeout: the
// unanswered attempts' undo is left to the server's lease.
TEST(Unanswered, AClientClosesWithinItsBoundAfterAnAbandonedAttempt) {
    RedisServer server;
    auto check = [&](const std::string& kind, const std::function<void(dlock::Client&)>& abandon) {
        std::optional<dlock::Client> client(std::in_place, server.uri());
        client->wait_connected();
        pause_scripts(server, 3000ms);
        abandon(*client);
        const auto closing = Clock::now();
        client.reset();
        const auto took = Clock::now() - closing;
        EXPECT_LT(took, dlock::Client::max_close_wait + 700ms)
            << kind << ": closing took " << std::chrono::duration<double>(took).count() << " s";
        server.cli({"CLIENT", "UNPAUSE"});
    };
    check("Lock", [](dlock::Client& c) {
        dlock::Lock lock(c, "close:lock");
        EXPECT_THROW((void)lock.try_lock_for(200ms), dlock::Error);
    });
    check("FairLock", [](dlock::Client& c) {
        dlock::FairLock lock(c, "close:fair");
        EXPECT_THROW((void)lock.try_lock_for(200ms), dlock::Error);
    });
    check("RwLock", [](dlock::Client& c) {
        dlock::RwLock lock(c, "close:rw");
        EXPECT_THROW((void)lock.try_lock_for(200ms), dlock::Error);
    });
    check("RwLock read", [](dlock::Client& c) {
        dlock::RwLock lock(c, "close:read");
        EXPECT_THROW((void)lock.try_lock_shared_for(200ms), dlock::Error);
    });
}
