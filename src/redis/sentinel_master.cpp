#include "sentinel_master.hpp"

namespace dlock::detail {

ConnectTarget::Admission SentinelMaster::admit(const ServerAddress& server, const Reply& reply,
                                               std::size_t refusals) {
    const bool named = reply.is_array() && !reply.elements.empty() && reply.elements[0].is_text();
    if (named && reply.elements[0].text == "master") return {};
    const std::string role = named ? reply.elements[0].text.substr(0, 32) : std::string("not a master");
    locator_->not_master(server);
    // One sentinel's stale answer is no failure of the deployment: ask the
    // next sentinels at once, within this attempt, so that what waits for
    // the connection keeps waiting (up to its deadline) instead of failing.
    // Each refusal moved the locator on by one sentinel; after as many
    // refusals as there are sentinels, all had their turn and the attempt
    // fails.
    if (refusals < locator_->sentinel_count()) return {Admission::Verdict::ask_again, {}};
    return {Admission::Verdict::refuse,
            server.to_string() + " says its role is '" + role +
                "': the sentinels named a server that is not the master; asking them again"};
}

}  // namespace dlock::detail
