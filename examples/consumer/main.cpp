// Built against an installed dlock (find_package or pkg-config). With
// --check it only proves that headers and library link and work offline;
// with a URL it pings that server.
#include <dlock/client.hpp>
#include <dlock/error.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
    std::string arg = argc > 1 ? argv[1] : "--check";
    if (arg == "--check") {
        std::error_code ec;
        dlock::ServerAddress::parse("redis://:pw@127.0.0.1:6380/1", ec);
        dlock::ServerAddress::parse("not a uri", ec);
        std::cout << "consumer: " << (ec == dlock::errc::invalid_uri ? "ok" : "unexpected") << "\n";
        return ec == dlock::errc::invalid_uri ? 0 : 1;
    }
    dlock::Client client(arg);
    std::cout << client.command({"PING"}).text << "\n";
}
