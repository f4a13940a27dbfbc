// The master of a Sentinel deployment as a connection's target
// (connect_target.hpp): each attempt goes where the sentinels name now
// (sentinel_locator.hpp), and the server is admitted only when ROLE says it
// is a master. The role check lives here, not in the connection: a single
// server or a cluster node is never asked.
#pragma once

#include <memory>

#include "connect_target.hpp"
#include "sentinel_locator.hpp"

namespace dlock::detail {

class SentinelMaster final : public ConnectTarget {
public:
    explicit SentinelMaster(std::shared_ptr<SentinelLocator> locator) : locator_(std::move(locator)) {}

    void locate(Found found) override { locator_->locate(std::move(found)); }
    // Sentinels may name a master that a failover has just demoted; and
    // this answer also proves the server answers.
    std::string_view admission_command() const override { return "ROLE"; }
    Admission admit(const ServerAddress& server, const Reply& reply, std::size_t refusals) override;
    bool demoted_by(const Reply& reply) const override {
        return reply.is_error() && reply.text.starts_with("READONLY");
    }
    void unusable(const ServerAddress& server) override { locator_->not_master(server); }
    void on_change(Moved listener) override { locator_->on_change(std::move(listener)); }

private:
    const std::shared_ptr<SentinelLocator> locator_;
};

}  // namespace dlock::detail
