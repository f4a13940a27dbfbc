// Where a connection's attempts go, and whether the server an attempt
// reached is the one wanted: the topology's part of a connect
// (topology.hpp). Connection is written once against it and never asks
// which deployment it is in.
//
//   FixedTarget     one address (a single server, a sentinel, a cluster
//                   node): every attempt goes there, and a server that
//                   answers PING is the one wanted;
//   SentinelMaster  the master the sentinels name now (sentinel_master.hpp):
//                   asked before each attempt, admitted by ROLE, and left
//                   when it answers READONLY or the sentinels name another.
//
// Threads: everything runs on the I/O thread.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/reply.hpp"
#include "dlock/server_address.hpp"

namespace dlock::detail {

class ConnectTarget {
public:
    // found runs exactly once (maybe before locate returns): the server of
    // this attempt, with the URI's transport and credentials.
    using Found = std::function<void(std::error_code ec, const ServerAddress& server, const std::string& detail)>;
    // The target moved to another server. Returns false once it wants no more calls.
    using Moved = std::function<bool(const ServerAddress& server)>;

    struct Admission {
        enum class Verdict {
            accept,     // the server is the one wanted
            ask_again,  // not it: locate again within the same attempt
            refuse,     // not it: the attempt fails with errc::not_master and detail
        } verdict = Verdict::accept;
        std::string detail;
    };

    virtual ~ConnectTarget() = default;

    virtual void locate(Found found) = 0;
    // The command sent last in the handshake whose answer admits the server
    // (admit()); empty: none, a PING proves the server answers.
    virtual std::string_view admission_command() const { return {}; }
    // The answer to admission_command() from server; refusals counts this
    // answer and the refused ones before it in the same attempt.
    virtual Admission admit(const ServerAddress& /*server*/, const Reply& /*reply*/, std::size_t /*refusals*/) {
        return {};
    }
    // A reply that says the server is no longer the one wanted (READONLY
    // from a demoted master): its command did not run there.
    virtual bool demoted_by(const Reply& /*reply*/) const { return false; }
    // The server located for an attempt could not be used (refused, silent,
    // wrong credentials, demoted): the next locate() looks elsewhere first.
    virtual void unusable(const ServerAddress& /*server*/) {}
    virtual void on_change(Moved /*listener*/) {}
};

class FixedTarget final : public ConnectTarget {
public:
    explicit FixedTarget(ServerAddress address) : address_(std::move(address)) {}
    void locate(Found found) override { found({}, address_, {}); }

private:
    const ServerAddress address_;
};

}  // namespace dlock::detail
