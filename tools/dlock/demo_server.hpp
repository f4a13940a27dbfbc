// The redis-server `dlock demo` starts when given no URL: on a free loopback
// port, no persistence, in a directory of its own under /tmp. Killed (by
// pid) and its directory removed when the object goes; killed also if the
// demo dies first (the child asks for SIGKILL on its parent's death).
// The tool's own: the shipped binary links no test support.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace dlock::cli {

class DemoServer {
public:
    // Starts redis-server (found on PATH) and waits, up to 30 s, until it
    // answers PING. Throws std::runtime_error naming what failed.
    DemoServer();
    ~DemoServer();
    DemoServer(const DemoServer&) = delete;
    DemoServer& operator=(const DemoServer&) = delete;

    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
    pid_t pid() const { return pid_; }

private:
    bool answers_ping() const;
    void start();
    void end();

    std::string dir_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

}  // namespace dlock::cli
