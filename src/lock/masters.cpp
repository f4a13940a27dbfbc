#include <algorithm>
#include <set>

#include "dlock/redlock.hpp"
#include "fan_out.hpp"
#include "lock_scripts.hpp"
#include "masters_core.hpp"
#include "quorum.hpp"
#include "script_replies.hpp"

namespace dlock {
namespace detail {
namespace {

// How each master is named in errors and outcomes: as its Client shows its
// address, without the password that the URL may carry.
std::vector<std::string> shown_addresses(const std::vector<std::unique_ptr<Client>>& clients) {
    std::vector<std::string> addresses;
    for (const auto& client : clients) addresses.push_back(client->address().to_string());
    return addresses;
}

std::vector<std::shared_ptr<ClientCore>> cores_of(const std::vector<std::unique_ptr<Client>>& clients) {
    std::vector<std::shared_ptr<ClientCore>> cores;
    for (const auto& client : clients) cores.push_back(client->core());
    return cores;
}

}  // namespace

// Every master's client records into one Metrics: the caller's, or one made here.
std::vector<std::unique_ptr<Client>> MastersCore::connect_all(const std::vector<std::string>& urls,
                                                              ClientOptions options) {
    if (!options.metrics) options.metrics = std::make_shared<Metrics>();
    if (urls.size() < 3 || urls.size() % 2 == 0)
        throw Error(errc::invalid_argument,
                    "Redlock needs an odd number of masters, at least 3; got " + std::to_string(urls.size()));
    std::vector<ServerAddress> addresses;
    std::set<std::string> seen;
    for (const auto& url : urls) {
        auto address = ServerAddress::parse(url);
        // Two URLs for one server would let one server count twice.
        if (!seen.insert(address.to_string()).second)
            throw Error(errc::invalid_argument, "the same master is given twice: " + address.to_string());
        addresses.push_back(std::move(address));
    }
    // One thread for every master: a vote is written to all of them and
    // their answers heard by it alone, and the caller is woken once.
    auto loop = IoLoop::make();
    std::vector<std::unique_ptr<Client>> clients;
    for (auto& address : addresses)
        clients.push_back(std::unique_ptr<Client>(new Client(std::move(address), options, loop)));
    loop->run();
    return clients;
}

MastersCore::MastersCore(const std::vector<std::string>& urls, const ClientOptions& options)
    : MastersCore(connect_all(urls, options)) {}

MastersCore::MastersCore(std::vector<std::unique_ptr<Client>> clients)
    : addresses(shown_addresses(clients)),
      cores(cores_of(clients)),
      clients_(std::move(clients)),
      runtime(*cores.front(), [this](auto& due, auto sent) { send_renewals(due, sent); }) {}

MastersCore::~MastersCore() { close(); }

std::size_t MastersCore::quorum() const noexcept { return majority(size()); }

const std::shared_ptr<Metrics>& MastersCore::metrics() const noexcept { return cores.front()->metrics(); }

Client& MastersCore::client(std::size_t index) {
    if (index >= clients_.size() || !clients_[index]) throw Error(errc::invalid_argument, "no such master");
    return *clients_[index];
}

std::error_code MastersCore::usable() const noexcept {
    // In a forked child every master's client refuses (fork_guard.hpp): say
    // so, not that a majority did not answer.
    if (cores.front()->forked()) return errc::forked_child;
    return closed_ ? make_error_code(errc::client_closed) : std::error_code{};
}

void MastersCore::send_renewals(std::vector<std::shared_ptr<Hold>>& due, LockClock::time_point sent) {
    for (auto& hold : due) {
        const auto& keys = hold->lock->keys;
        const auto fence = keys.fence();
        std::string_view k[] = {keys.lock, fence};
        // '1': take back a master that lost our key (renew.lua).
        std::string_view a[] = {hold->owner, hold->lock->lease_ms, hold->lock->retention_ms, "1"};
        std::weak_ptr<Hold> weak = hold;
        const auto n = size();
        // Only Redlocks put holds in this keeper.
        const auto& identity = static_cast<const RedlockIdentity&>(*hold->lock);
        FanOut::send(cores, renew_script(), k, a, sent + identity.node_timeout,
                     [this, weak, sent, n](const std::vector<Ballot>& ballots) {
                         auto held = weak.lock();
                         if (!held) return;
                         std::size_t renewed = 0, refused = 0;
                         for (const auto& ballot : ballots) {
                             if (ballot.error) continue;
                             if (read_renewed(ballot.reply)) ++renewed;
                             else ++refused;
                         }
                         if (won(n, renewed)) runtime.keeper().renewed(held, sent);
                         else if (cannot_win(n, refused)) runtime.keeper().refused(held);
                         else runtime.keeper().failed(held, errc::no_quorum);
                     });
    }
}

std::shared_ptr<FanOut> MastersCore::send_release(const RedlockIdentity& identity, const std::string& owner) {
    const auto& keys = identity.keys;
    const auto tombstone = keys.tombstone(owner);
    const auto operation = runtime.next_operation_id();
    std::string_view k[] = {keys.lock, keys.fence(), keys.channel(), tombstone};
    std::string_view a[] = {owner, identity.lease_ms, operation, "all", identity.retention_ms};
    return FanOut::send(cores, release_script(), k, a, Clock::now() + identity.node_timeout);
}

void MastersCore::finish_before_close(std::shared_ptr<FanOut> release) {
    std::lock_guard lock(stragglers_mutex_);
    std::erase_if(stragglers_, [](const auto& fan) { return fan->complete(); });
    stragglers_.push_back(std::move(release));
}

void MastersCore::close() {
    if (closed_.exchange(true)) return;
    // What the acquisitions and the holds leave is released, and the
    // clients close, once the last acquisition has left: its answers are
    // read by the masters' loop, and its grant becomes a hold or a straggler
    // only then. On that loop (a callback of theirs dropped the last
    // Masters) no answer could arrive while this thread waited: the close
    // does not wait there. Elsewhere it waits at most Client::max_close_wait,
    // and an acquisition slower than that is finished after it, by the loop.
    auto self = weak_from_this().lock();
    auto finish_on_loop = [self] {
        asio::post(self->cores.front()->io(), [self] { self->close_when_answered(self, self->releases_of_close()); });
    };
    if (self && cores.front()->on_io_thread()) {
        runtime.closing().close_then(finish_on_loop);
        return;
    }
    // With no owner left (the core's own destructor) nothing could keep the
    // clients for a late finish.
    const auto late = self ? std::function<void()>(finish_on_loop) : nullptr;
    if (!runtime.closing().close(Clock::now() + Client::max_close_wait, late) && self) return;
    // Every acquisition has left: every hold still ours, and a release a
    // waiter left on its way (among the stragglers), is released here.
    for (auto& release : releases_of_close()) release->wait([](const auto&) { return false; });
    clients_.clear();  // stops every I/O thread; the keeper's timer with the first
}

std::vector<std::shared_ptr<FanOut>> MastersCore::releases_of_close() {
    const auto holds = runtime.drop_holds();
    std::vector<std::shared_ptr<FanOut>> releases;
    {
        std::lock_guard lock(stragglers_mutex_);
        releases.swap(stragglers_);
    }
    for (auto& hold : holds) {
        releases.push_back(send_release(static_cast<const RedlockIdentity&>(*hold->lock), hold->owner));
    }
    return releases;
}

void MastersCore::close_when_answered(std::shared_ptr<MastersCore> self,
                                      const std::vector<std::shared_ptr<FanOut>>& releases) {
    // Everything below runs on the loop's one thread: the count needs no lock.
    auto unanswered = std::make_shared<std::size_t>(releases.size() + 1);
    auto one_answered = [self, unanswered] {
        if (--*unanswered != 0) return;
        self->clients_.clear();  // their shutdowns are posted to the loop, and run before...
        // ...the core goes: those shutdowns still cancel its keeper's timer.
        asio::post(self->cores.front()->io(), [self] {});
    };
    // Every release is answered or times out by its deadline (each master's
    // connection keeps its own), so the clients close within a node timeout.
    for (const auto& release : releases) release->when_complete([one_answered](const auto&) { one_answered(); });
    one_answered();
}

}  // namespace detail

Masters::Masters(const std::vector<std::string>& urls, ClientOptions options)
    : core_(std::make_shared<detail::MastersCore>(urls, options)) {}

Masters::~Masters() { core_->close(); }

std::size_t Masters::size() const noexcept { return core_->size(); }
std::size_t Masters::quorum() const noexcept { return core_->quorum(); }
Metrics& Masters::metrics() const noexcept { return *core_->metrics(); }
Client& Masters::client(std::size_t index) { return core_->client(index); }

}  // namespace dlock
