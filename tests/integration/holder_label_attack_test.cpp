// Attacks on the holder label kept per thread (OwnerIds::holder_label): it
// must name the process and thread that asks, whenever it is asked.
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "redis_server.hpp"
#include "runtime/owner_ids.hpp"

namespace {

std::string pid_part(long pid) { return " pid=" + std::to_string(pid) + " "; }

// Reads everything from fd until its end.
std::string read_all(int fd) {
    std::string out;
    char buffer[256];
    for (;;) {
        const auto n = ::read(fd, buffer, sizeof buffer);
        if (n <= 0) break;
        out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
}

}  // namespace

// A child of fork() names itself on the forking thread and on a thread it
// starts; a host renamed in the child (its own UTS namespace) is named
// within the recheck period (a second).
TEST(HolderLabelAttack, AForkedChildNamesItselfItsThreadsAndItsNewHostName) {
    (void)dlock::detail::OwnerIds::holder_label();
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(pipe_fds[0]);
        std::string out = std::string(dlock::detail::OwnerIds::holder_label()) + "\n";
        std::thread([&] {
            out += std::string(dlock::detail::OwnerIds::holder_label()) + " tid=" + std::to_string(::syscall(SYS_gettid)) + "\n";
        }).join();
        if (::unshare(CLONE_NEWUTS) == 0 && ::sethostname("renamed-host", 12) == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1100));
            out += std::string(dlock::detail::OwnerIds::holder_label()) + "\n";
        } else {
            out += "no UTS namespace\n";
        }
        (void)!::write(pipe_fds[1], out.data(), out.size());
        ::_exit(0);
    }
    ::close(pipe_fds[1]);
    const std::string lines = read_all(pipe_fds[0]);
    ::close(pipe_fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    std::printf("%s", lines.c_str());
    const auto first_end = lines.find('\n');
    const auto second_end = lines.find('\n', first_end + 1);
    const auto first = lines.substr(0, first_end);
    const auto second = lines.substr(first_end + 1, second_end - first_end - 1);
    const auto third = lines.substr(second_end + 1);
    EXPECT_NE(first.find(pid_part(child) + "thread=" + std::to_string(child)), std::string::npos) << first;
    EXPECT_NE(second.find(pid_part(child)), std::string::npos) << second;
    const auto tid_at = second.find(" tid=");
    ASSERT_NE(tid_at, std::string::npos) << second;
    EXPECT_NE(second.find(" thread=" + second.substr(tid_at + 5) + " "), std::string::npos) << second;
    if (third.rfind("no UTS namespace", 0) != 0) {
        EXPECT_EQ(third.rfind("host=renamed-host ", 0), 0u) << third;
    }
}

// Another thread-local object whose destructor asks for the label (its
// thread ends) after the kept label was destroyed: thread-local objects go
// in the reverse order they were made, so one made before the thread's first
// acquisition outlives the label.
TEST(HolderLabelAttack, ALabelAskedForAtThreadExitIsStillTheThreadsLabel) {
    std::string seen;
    long tid = 0;
    std::thread([&] {
        struct AtExit {
            std::string* out;
            ~AtExit() { *out = std::string(dlock::detail::OwnerIds::holder_label()); }
        };
        thread_local AtExit at_exit{&seen};  // made first: destroyed last
        (void)at_exit.out;
        tid = static_cast<long>(::syscall(SYS_gettid));
        (void)dlock::detail::OwnerIds::holder_label();  // the kept label is made after it
    }).join();
    EXPECT_EQ(seen.rfind("host=", 0), 0u) << "the label read at thread exit: " << seen;
    EXPECT_NE(seen.find(pid_part(getpid())), std::string::npos) << seen;
    EXPECT_NE(seen.find(" thread=" + std::to_string(tid)), std::string::npos) << seen;
}

// The same through the public API: a thread-local object whose destructor
// takes a lock at thread exit (a per-thread cache flushed under a lock),
// made before the thread's first acquisition. The grant's holder must name
// this process (and the process must not crash).
TEST(HolderLabelAttack, AGrantTakenAtThreadExitNamesItsHolder) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::string holder;
    std::thread([&] {
        struct AtExit {
            dlock::Client* client;
            std::string* holder;
            ~AtExit() {
                try {
                    auto lock = client->lock("label-at-exit");
                    lock.lock();
                    const auto locks = dlock::list_locks(*client, "label-at-exit");
                    if (locks.size() == 1) *holder = locks[0].second.holder;
                    lock.unlock();
                } catch (const std::exception& e) {
                    *holder = std::string("threw: ") + e.what();
                }
            }
        };
        // The library's other thread-local objects (the command buffer, the
        // read buffer, the owner's name) are made before at_exit, so that
        // they outlive it: only the label is made after it.
        for (int i = 0; i < 2; ++i) ASSERT_EQ(client.command({"PING"}).text, "PONG");  // the second one driven
        std::error_code ignored;
        const std::string_view unknown[] = {"NO-SUCH-COMMAND"};
        (void)client.command(unknown, ignored);  // the last server error's text
        auto first = client.lock("label-first");
        first.unlock(ignored);  // the owner's name, asked for without an acquisition
        thread_local AtExit at_exit{&client, &holder};
        (void)at_exit.client;
        first.lock();  // the thread's label is made now, after at_exit
        first.unlock();
    }).join();
    EXPECT_EQ(holder.rfind("host=", 0), 0u) << "holder: " << holder;
    EXPECT_NE(holder.find(pid_part(getpid())), std::string::npos) << "holder: " << holder;
}

// Not the label's alone: any of the library's thread-local objects made
// after such an object is gone when its destructor calls in. Here a plain
// command at thread exit, the thread's first command made after at_exit:
// the command buffer (client_calls.cpp) and the read buffer
// (connection_drive.cpp) are used after they were destroyed.
TEST(ThreadExitAttack, ACommandSentAtThreadExitIsAnswered) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::string answers;
    std::thread([&] {
        struct AtExit {
            dlock::Client* client;
            std::string* answers;
            ~AtExit() {
                for (int i = 0; i < 3; ++i) {
                    const std::string text = "at-exit-" + std::to_string(i) + std::string(40, 'x');
                    const std::string_view echo[] = {"ECHO", text};
                    std::error_code ec;
                    const auto reply = client->command(echo, ec);
                    *answers += (!ec && reply.text == text) ? "ok " : "wrong ";
                }
            }
        };
        thread_local AtExit at_exit{&client, &answers};
        (void)at_exit.client;
        for (int i = 0; i < 3; ++i) ASSERT_EQ(client.command({"PING"}).text, "PONG");
    }).join();
    EXPECT_EQ(answers, "ok ok ok ");
}

// A lock held in a thread-local object when its thread ends: the lock
// object's destructor releases it, after the library's thread-local
// objects made by the thread's first calls are gone.
TEST(ThreadExitAttack, ALockHeldInAThreadLocalObjectIsReleasedAtThreadExit) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    int releases = 0;
    for (int round = 0; round < 5; ++round) {
        const std::string name = "thread-local-lock-" + std::to_string(round);
        std::thread([&] {
            thread_local std::optional<dlock::Lock> held;  // made first: destroyed last
            held.emplace(client.lock(name));
            for (int i = 0; i < 2; ++i) ASSERT_EQ(client.command({"PING"}).text, "PONG");
            held->lock();
        }).join();
        if (dlock::list_locks(client, name).empty()) ++releases;
    }
    EXPECT_EQ(releases, 5);
}
