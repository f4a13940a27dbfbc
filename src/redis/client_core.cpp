#include "client_core.hpp"

#include "address_checks.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

void validate(const ClientOptions& options) {
    using std::chrono::milliseconds;
    if (options.connect_timeout <= milliseconds::zero() || options.command_timeout <= milliseconds::zero())
        throw Error(errc::invalid_argument, "connect_timeout and command_timeout must be positive");
    if (options.reconnect_backoff_min <= milliseconds::zero() ||
        options.reconnect_backoff_max < options.reconnect_backoff_min)
        throw Error(errc::invalid_argument, "reconnect backoff must satisfy 0 < min <= max");
    if (options.max_string_bytes == 0 || options.max_array_elements == 0)
        throw Error(errc::invalid_argument, "reply limits must be positive");
    if (options.max_reply_overhead < (std::size_t{64} << 10))
        throw Error(errc::invalid_argument, "max_reply_overhead must be at least 64 KiB (65536 bytes); default 16 MiB");
    if (options.sentinel_poll_interval <= milliseconds::zero() || options.cluster_refresh_interval <= milliseconds::zero())
        throw Error(errc::invalid_argument, "sentinel_poll_interval and cluster_refresh_interval must be positive");
}

// An address built field by field has not been through parse(); refuse here
// what the I/O thread could not connect to, rather than fail there.
const ServerAddress& validate(const ServerAddress& address) {
    if (address.topology == ServerAddress::Topology::sentinel && address.master_name.empty())
        throw Error(errc::invalid_uri, "a sentinel address needs a master name");
    if (address.topology != ServerAddress::Topology::standalone &&
        address.transport == ServerAddress::Transport::unix_socket)
        throw Error(errc::invalid_uri, "sentinels and cluster nodes are reached over TCP, not a unix socket");
    if (address.transport != ServerAddress::Transport::unix_socket) return address;
    if (auto problem = socket_path_problem(address.socket_path); !problem.empty())
        throw Error(errc::invalid_uri, problem);
    return address;
}

// Hooks are other layers' code: one that throws must neither stop the others
// nor escape a shutdown (a destructor, or the I/O thread's last handler).
void run_each(std::vector<std::function<void()>>& hooks) noexcept {
    for (auto& hook : hooks) {
        try {
            hook();
        } catch (...) {
        }
    }
}

}  // namespace

std::shared_ptr<ClientCore> ClientCore::create(ServerAddress address, ClientOptions options,
                                               std::shared_ptr<IoLoop> loop) {
    // Whoever drops the last reference in a forked child (a Client, a Lock
    // that outlived it), the core is kept there, not destroyed: destroying it
    // would close the parent's sockets and deregister them from the epoll
    // instance the parent shares, and join a thread the child does not have.
    // A core stopped while its loop still runs for other cores is destroyed
    // when the loop's thread has ended: handlers still queued for its closed
    // sockets may refer to it.
    return std::shared_ptr<ClientCore>(
        new ClientCore(std::move(address), std::move(options), std::move(loop)), [](ClientCore* core) {
            if (core->forked()) return keep_in_child(core);
            core->stop();
            std::function<void()> destroy = [core] { delete core; };
            if (!core->loop_->keep_until_ended(destroy)) delete core;
        });
}

namespace {
ClientOptions with_metrics(ClientOptions options) {
    if (!options.metrics) options.metrics = std::make_shared<Metrics>();
    return options;
}
}  // namespace

namespace {
std::shared_ptr<IoLoop> joined(std::shared_ptr<IoLoop> loop) {
    loop->join();
    return loop;
}

// A core that fails to be made leaves the loop it joined, or the loop would
// wait for it for ever.
std::shared_ptr<Topology> topology_on(IoLoop& loop, const ServerAddress& address, const ClientOptions& options) {
    try {
        return Topology::make(loop.io(), address, options);
    } catch (...) {
        loop.leave({});
        throw;
    }
}
}  // namespace

ClientCore::ClientCore(ServerAddress address, ClientOptions options, std::shared_ptr<IoLoop> loop)
    : address_((validate(address), std::move(address))),
      options_((validate(options), with_metrics(std::move(options)))),
      own_loop_(!loop),
      loop_(joined(loop ? std::move(loop) : IoLoop::make())),
      topology_(topology_on(*loop_, address_, options_)) {}

ClientCore::~ClientCore() {
    if (!forked()) stop();
}

void ClientCore::start() {
    // Topologies start before any of their handlers runs (topology.hpp):
    // on a loop that runs already, while the loop runs nothing else.
    loop_->run_alone([this] {
        topology_->start();
        // A Sentinel failover, or a failover or a migration that moved some
        // slot to another master: the holds are revalidated. Registered
        // before the topology's handlers run, so no change is missed.
        topology_->on_change([weak = weak_from_this()] {
            auto self = weak.lock();
            if (!self) return false;
            self->run_failover_hooks();
            return true;
        });
    });
    if (own_loop_) loop_->run();
}

std::shared_ptr<FiberRunner> ClientCore::fiber_runner() {
    std::lock_guard lock(fiber_mutex_);
    if (fibers_closed_ || usable()) return nullptr;
    if (!fibers_) fibers_ = FiberRunner::start();
    return fibers_;
}

void ClientCore::stop() {
    // Asynchronous operations end first: they need the I/O thread for
    // their last answers (a stop request ends each within a round trip).
    std::shared_ptr<FiberRunner> fibers;
    {
        std::lock_guard lock(fiber_mutex_);
        fibers_closed_ = true;
        fibers.swap(fibers_);
    }
    if (fibers) fibers->shutdown(/*wait=*/!on_io_thread());
    std::vector<std::function<void()>> hooks;
    {
        std::lock_guard lock(hooks_mutex_);
        hooks.swap(before_stop_);
    }
    if (!on_io_thread()) run_each(hooks);
    if (stopped_.exchange(true)) return;
    // The last core on the loop (its own, for a Client) also joins the thread.
    loop_->leave([this] { shutdown_on_io_thread(); });
}

void ClientCore::shutdown_on_io_thread() {
    std::vector<std::function<void()>> io_hooks;
    {
        std::lock_guard lock(hooks_mutex_);
        io_hooks.swap(on_io_shutdown_);
    }
    run_each(io_hooks);
    std::shared_ptr<Subscriber> subscriber;
    {
        std::lock_guard lock(subscriber_mutex_);
        subscriber_closed_ = true;
        subscriber = subscriber_;
    }
    if (subscriber) subscriber->shutdown();
    topology_->shutdown();
}

bool ClientCore::forked() const noexcept { return fork_guard_.forked(); }

std::error_code ClientCore::usable() const noexcept {
    if (forked()) return errc::forked_child;
    if (stopped_.load(std::memory_order_relaxed)) return errc::client_closed;
    return {};
}

void ClientCore::fail_soon(Completion& done, std::error_code ec) {
    // A child has no I/O thread to run it, and must not wake the parent's.
    if (ec == errc::forked_child) return done(ec, Reply{});
    auto fail = [done = std::move(done), ec]() mutable { done(ec, Reply{}); };
    // The I/O thread is gone (every client on it closed): nobody would run
    // a post, and a caller waiting without a deadline would wait for ever.
    if (!loop_->post_unless_ended(fail)) fail();
}

void ClientCore::submit_dedicated(std::string first, DedicatedConnections::Next next, DedicatedConnections::Done done,
                                  Clock::time_point deadline) {
    if (auto ec = usable()) return done(ec, {});
    topology_->submit_dedicated(std::move(first), std::move(next), std::move(done), deadline);
}

ClientCore::ClusterFootprint ClientCore::cluster_footprint() {
    const auto topology = topology_->footprint();
    ClusterFootprint footprint;
    footprint.router_nodes = topology.command_nodes;
    footprint.node_pools = topology.node_pools;
    std::shared_ptr<Subscriber> subscriber;
    {
        std::lock_guard lock(subscriber_mutex_);
        subscriber = subscriber_;
    }
    if (subscriber) footprint.subscriber_shards = subscriber->shard_count();
    return footprint;
}

void ClientCore::on_io_shutdown(std::function<void()> hook) {
    std::lock_guard lock(hooks_mutex_);
    on_io_shutdown_.push_back(std::move(hook));
}

void ClientCore::on_failover(std::function<void()> hook) {
    std::lock_guard lock(hooks_mutex_);
    on_failover_.push_back(std::move(hook));
}

void ClientCore::run_failover_hooks() {
    recorder().event(ClientEvent::failover);
    std::vector<std::function<void()>> hooks;
    {
        std::lock_guard lock(hooks_mutex_);
        hooks = on_failover_;
    }
    run_each(hooks);
}

void ClientCore::before_stop(std::function<void()> hook) {
    std::lock_guard lock(hooks_mutex_);
    before_stop_.push_back(std::move(hook));
}

Subscription ClientCore::subscribe(std::string channel, Subscription::Listener listener) {
    throw_if(usable());
    std::shared_ptr<Subscriber> subscriber;
    {
        // A close that began meanwhile either finds the Subscriber made here
        // and shuts it down, or has already looked: then none is made.
        std::lock_guard lock(subscriber_mutex_);
        if (subscriber_closed_)
            throw Error(errc::client_closed, "subscribe(\"" + channel + "\"): the client is closing");
        if (!subscriber_) {
            subscriber_ = std::make_shared<Subscriber>(loop_->io(), options_, topology_);
            subscriber_->set_io_thread(loop_->thread_id());
            subscriber_->start();
        }
        subscriber = subscriber_;
    }
    return subscriber->add(std::move(channel), std::move(listener));
}

std::error_code ClientCore::wait_connected(Clock::time_point deadline) {
    if (auto ec = usable()) return ec;
    const auto until = std::min(deadline, Clock::now() + options_.connect_timeout + options_.command_timeout);
    return topology_->wait_connected(until);
}

}  // namespace dlock::detail
