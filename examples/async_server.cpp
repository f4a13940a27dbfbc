// A small Asio server whose coroutines serialise work per key with
// co_await dlock::async_lock(...), across coroutines and across processes.
//
//   async_server REDIS_URL DIR ADDS
//
// The server listens on a loopback port and answers "add KEY" with the
// key's new count: it reads DIR/KEY, waits a moment (the window in which an
// unlocked read-modify-write loses updates), writes the count + 1, and
// stamps the lock's fencing token. To show itself working it then sends
// ADDS requests to itself over ADDS connections at once, spread over three
// keys, and exits 0 when every one was answered. Run it several times side
// by side on one DIR: no update is lost.
#include <asio/experimental/as_tuple.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/streambuf.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <dlock/async.hpp>
#include <dlock/client.hpp>
#include <dlock/error.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <istream>
#include <string>

using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// The work a key's lock protects: a read-modify-write of its file.
awaitable<unsigned long> add_one(const std::filesystem::path& file) {
    unsigned long count = 0;
    std::ifstream(file) >> count;
    asio::steady_timer pause(co_await asio::this_coro::executor, 2ms);
    co_await pause.async_wait(use_awaitable);
    std::ofstream(file, std::ios::trunc) << count + 1 << '\n';
    co_return count + 1;
}

awaitable<void> serve(tcp::socket socket, dlock::Client& redis, std::filesystem::path dir) {
    asio::streambuf input;
    for (;;) {
        auto [ec, n] = co_await asio::async_read_until(socket, input, '\n', asio::experimental::as_tuple(use_awaitable));
        if (ec) co_return;
        std::istream line(&input);
        std::string verb, key;
        line >> verb >> key;
        input.consume(input.size());
        std::string answer;
        if (verb != "add" || key.empty() || key.find('/') != std::string::npos) {
            answer = "error: say add KEY\n";
        } else {
            dlock::Lock lock(redis, "example:counter:" + key);
            dlock::AsyncHold hold = co_await dlock::async_lock(lock, use_awaitable);
            const auto count = co_await add_one(dir / key);
            answer = key + " " + std::to_string(count) + " token " + std::to_string(hold.fencing_token()) + "\n";
            co_await dlock::async_unlock(hold, use_awaitable);
        }
        co_await asio::async_write(socket, asio::buffer(answer), use_awaitable);
    }
}

awaitable<void> listen(tcp::acceptor& acceptor, dlock::Client& redis, std::filesystem::path dir) {
    for (;;) {
        auto [ec, socket] = co_await acceptor.async_accept(asio::experimental::as_tuple(use_awaitable));
        if (ec) co_return;
        asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), redis, dir), asio::detached);
    }
}

awaitable<void> ask(tcp::endpoint server, std::string key, int& answered) {
    tcp::socket socket(co_await asio::this_coro::executor);
    co_await socket.async_connect(server, use_awaitable);
    std::string request = "add " + key + "\n";
    co_await asio::async_write(socket, asio::buffer(request), use_awaitable);
    asio::streambuf reply;
    co_await asio::async_read_until(socket, reply, '\n', use_awaitable);
    ++answered;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::cerr << "usage: async_server REDIS_URL DIR ADDS\n";
        return 2;
    }
    try {
        dlock::Client redis(argv[1]);
        const std::filesystem::path dir = argv[2];
        const int adds = std::stoi(argv[3]);
        asio::io_context io;  // one thread: every coroutine, every wait
        tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        asio::co_spawn(io, listen(acceptor, redis, dir), asio::detached);
        int answered = 0;
        for (int i = 0; i < adds; ++i)
            asio::co_spawn(io, ask(acceptor.local_endpoint(), "key" + std::to_string(i % 3), answered),
                           [](std::exception_ptr failed) {
                               if (failed) std::rethrow_exception(failed);
                           });
        asio::steady_timer watch(io);
        std::function<void(std::error_code)> check = [&](std::error_code) {
            if (answered == adds) return io.stop();
            watch.expires_after(10ms);
            watch.async_wait(check);
        };
        check({});
        io.run_for(60s);
        std::printf("%d of %d adds answered\n", answered, adds);
        return answered == adds ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "async_server: %s\n", e.what());
        return 1;
    }
}
