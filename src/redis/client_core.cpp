#include "client_core.hpp"

#include "runtime/condition.hpp"

#include <semaphore>
#include <set>

#include "address_checks.hpp"
#include "cluster_slots.hpp"
#include "command_format.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// Formatting happens before any lock is taken; one buffer per thread keeps
// the hot path free of allocations.
std::string& format_buffer() {
    thread_local std::string buffer;
    buffer.clear();
    // A huge command (a user's large value) is not kept for the thread's life.
    if (buffer.capacity() > kept_buffer_capacity) std::string().swap(buffer);
    return buffer;
}

// The completion of a call sent as EVALSHA: on NOSCRIPT (SCRIPT FLUSH,
// restart, failover) the same call goes again, as
// ClientCore::resend_after_no_script says, with this as its completion.
struct NoScriptDetour {
    std::weak_ptr<ClientCore> core;
    Script script;
    std::string evalsha;
    Completion done;
    Clock::time_point deadline;
    ClientCore::ScriptResend resend{};

    void operator()(std::error_code ec, Reply&& reply) {
        auto client = core.lock();
        if (client && resend.eval) client->note_eval_answered(script);
        if (ec != errc::no_script || !client) return done(ec, std::move(reply));
        auto bytes = client->resend_after_no_script(script, evalsha, resend);
        if (bytes.empty()) return done(ec, std::move(reply));
        const auto until = deadline;
        client->submit_formatted(bytes, std::move(*this), until);  // nothing of this is used after
    }
};

struct SyncCall {
    std::binary_semaphore done{0};
    std::error_code ec;
    Reply reply;
    // A fiber's call (an asynchronous operation) parks instead; made before
    // the call is sent, only for a fiber.
    std::mutex mutex;
    bool answered = false;
    std::unique_ptr<Condition> parked;
};

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

std::shared_ptr<ClientCore> ClientCore::create(ServerAddress address, ClientOptions options) {
    // Whoever drops the last reference in a forked child (a Client, a Lock
    // that outlived it), the core is kept there, not destroyed: destroying it
    // would close the parent's sockets and deregister them from the epoll
    // instance the parent shares, and join a thread the child does not have.
    return std::shared_ptr<ClientCore>(new ClientCore(std::move(address), std::move(options)), [](ClientCore* core) {
        if (core->forked()) keep_in_child(core);
        else delete core;
    });
}

namespace {
ClientOptions with_metrics(ClientOptions options) {
    if (!options.metrics) options.metrics = std::make_shared<Metrics>();
    return options;
}
}  // namespace

ClientCore::ClientCore(ServerAddress address, ClientOptions options)
    : address_((validate(address), std::move(address))),
      options_((validate(options), with_metrics(std::move(options)))),
      work_(asio::make_work_guard(io_)) {
    if (address_.topology == ServerAddress::Topology::cluster) {
        cluster_ = std::make_shared<ClusterRouter>(io_, address_, options_);
        return;
    }
    if (address_.topology == ServerAddress::Topology::sentinel)
        locator_ = std::make_shared<SentinelLocator>(io_, address_, options_);
    commands_ = std::make_shared<Connection>(io_, address_, options_, Connection::Mode::request_reply,
                                             Connection::Hooks{}, locator_);
}

ClientCore::~ClientCore() {
    if (!forked()) stop();
}

void ClientCore::start() {
    if (locator_) {
        locator_->on_change([weak = weak_from_this()](const ServerAddress&) {
            auto self = weak.lock();
            if (!self) return false;
            self->run_failover_hooks();
            return true;
        });
        locator_->start();
    }
    if (cluster_) {
        // A failover or a migration moved some slot to another master: the
        // holds are revalidated as after a Sentinel failover.
        cluster_->on_change([weak = weak_from_this()] {
            auto self = weak.lock();
            if (!self) return false;
            self->retire_unused_node_pools();
            self->run_failover_hooks();
            return true;
        });
        cluster_->start();
    } else {
        commands_->start();
    }
    thread_ = std::thread([this] { run_io(); });
    io_thread_id_ = thread_.get_id();
}

// No exception may end the I/O thread (an uncaught one terminates the
// process). Connections turn their own handlers' exceptions into connection
// errors; what still arrives here (a completion posted by the client core,
// or a DedicatedConnections callback, that threw) is dropped, and the loop
// goes on: Asio allows run() to be called again after a handler threw.
void ClientCore::run_io() noexcept {
    for (;;) {
        try {
            io_.run();
            break;
        } catch (...) {
        }
    }
    // No I/O thread from here: a failure is told on its caller's thread
    // (fail_soon). What was posted since run() ran out of work runs now.
    {
        std::lock_guard lock(io_end_mutex_);
        io_ended_ = true;
    }
    for (;;) {
        try {
            io_.restart();
            io_.poll();
            return;
        } catch (...) {
        }
    }
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
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
        std::vector<std::function<void()>> io_hooks;
        {
            std::lock_guard lock(hooks_mutex_);
            io_hooks.swap(on_io_shutdown_);
        }
        run_each(io_hooks);
        if (commands_) commands_->shutdown();
        if (subscriber_) subscriber_->shutdown();
        if (locator_) locator_->shutdown();
        // Synchronises with a concurrent first submit_dedicated; none is made after this.
        std::call_once(dedicated_once_, [] {});
        if (dedicated_) dedicated_->shutdown();
        {
            std::lock_guard lock(node_dedicated_mutex_);
            node_dedicated_closed_ = true;
            for (auto& [key, pool] : node_dedicated_) pool->shutdown();
        }
        if (cluster_) cluster_->shutdown();
        work_.reset();
        // Handlers still queued for closed sockets and cancelled timers run
        // and return; then run() ends.
    });
    if (std::this_thread::get_id() == io_thread_id_) {
        thread_.detach();  // a last reference dropped inside a callback; the thread ends by itself
        return;
    }
    thread_.join();
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
    {
        std::lock_guard lock(io_end_mutex_);
        if (!io_ended_) {
            asio::post(io_, [done = std::move(done), ec]() mutable { done(ec, Reply{}); });
            return;
        }
    }
    // The I/O thread is gone (the client closed): nobody would run a post,
    // and a caller waiting without a deadline would wait for ever.
    done(ec, Reply{});
}

void ClientCore::submit_formatted(std::string_view formatted, Completion done, Clock::time_point deadline) {
    std::error_code ec = usable();
    if (!ec) {
        ec = cluster_ ? cluster_->submit(formatted, done, deadline) : commands_->submit(formatted, done, deadline);
        if (!ec) return;
    }
    fail_soon(done, ec);
}

void ClientCore::submit(Args args, Completion done) {
    auto& bytes = format_buffer();
    append_command(bytes, args);
    submit_formatted(bytes, std::move(done), deadline());
}

void ClientCore::eval_async(const Script& script, Args keys, Args argv, Completion done) {
    eval_async(script, keys, argv, std::move(done), deadline());
}

void ClientCore::eval_async(const Script& script, Args keys, Args argv, Completion done, Clock::time_point deadline) {
    auto& bytes = format_buffer();
    append_eval(bytes, "EVALSHA", script.sha1(), keys, argv);
    submit_formatted(bytes, NoScriptDetour{weak_from_this(), script, std::string(bytes), std::move(done), deadline},
                     deadline);
}

std::string ClientCore::resend_after_no_script(const Script& script, std::string_view evalsha, ScriptResend& resend) {
    if (resend.eval) return {};
    recorder().event(ClientEvent::script_reload);
    if (!resend.evalsha_again && commands_ && known_scripts_.eval_sent(script.sha1(), commands_->sessions())) {
        resend.evalsha_again = true;
        return std::string(evalsha);
    }
    resend.eval = true;
    note_eval_sent(script);
    return rewrite_evalsha_as_eval(evalsha, script.sha1(), script.text());
}

template <typename Start>
Reply ClientCore::wait_for(Start start, std::error_code& ec) noexcept {
    try {
        if ((ec = usable())) return {};
        if (on_io_thread()) {
            ec = errc::invalid_argument;  // a blocking call here would wait for itself
            return {};
        }
        auto call = std::make_shared<SyncCall>();
        if (Fiber::current()) call->parked = std::make_unique<Condition>();
        auto until = deadline();
        start(
            [call](std::error_code e, Reply&& r) {
                call->ec = e;
                call->reply = std::move(r);
                if (call->parked) {
                    {
                        std::lock_guard lock(call->mutex);
                        call->answered = true;
                    }
                    call->parked->notify_all();
                }
                call->done.release();
            },
            until);
        if (Fiber::current()) {
            std::unique_lock lock(call->mutex);
            if (!call->parked->wait_until(lock, until, [&] { return call->answered; })) {
                ec = errc::command_timeout;
                return {};
            }
        } else if (!spin_for(call->done) && !call->done.try_acquire_until(until)) {
            ec = errc::command_timeout;
            return {};
        }
        ec = call->ec;
        return std::move(call->reply);
    } catch (const std::bad_alloc&) {
        ec = std::make_error_code(std::errc::not_enough_memory);
        return {};
    }
}

Reply ClientCore::call(Args args, std::error_code& ec) noexcept {
    return wait_for(
        [&](Completion done, Clock::time_point until) {
            auto& bytes = format_buffer();
            append_command(bytes, args);
            submit_formatted(bytes, std::move(done), until);
        },
        ec);
}

Reply ClientCore::call_on(const ServerAddress& master, Args args, std::error_code& ec) noexcept {
    if (!cluster_) return call(args, ec);
    return wait_for(
        [&](Completion done, Clock::time_point until) {
            auto& bytes = format_buffer();
            append_command(bytes, args);
            if (auto failed = cluster_->submit_to(master, bytes, done, until)) fail_soon(done, failed);
        },
        ec);
}

std::string ClientCore::server_for_key(std::string_view key) const {
    if (cluster_) {
        auto master = cluster_->master_for_slot(key_slot(key));
        return master ? master->host + ":" + std::to_string(master->port) : std::string();
    }
    return commands_->peer();
}

std::vector<ServerAddress> ClientCore::cluster_masters() const {
    return cluster_ ? cluster_->masters() : std::vector<ServerAddress>{};
}

Reply ClientCore::eval(const Script& script, Args keys, Args argv, std::error_code& ec) noexcept {
    return wait_for(
        [&](Completion done, Clock::time_point until) { eval_async(script, keys, argv, std::move(done), until); }, ec);
}

void ClientCore::submit_dedicated(std::string first, DedicatedConnections::Next next, DedicatedConnections::Done done,
                                  Clock::time_point deadline) {
    if (auto ec = usable()) return done(ec, {});
    if (cluster_) return submit_dedicated_in_cluster(std::move(first), std::move(next), std::move(done), deadline);
    std::call_once(dedicated_once_,
                   [this] { dedicated_ = std::make_shared<DedicatedConnections>(io_, address_, options_, locator_); });
    if (!dedicated_) return done(errc::client_closed, {});  // stop() came first
    dedicated_->submit(std::move(first), std::move(next), std::move(done), deadline);
}

// WAIT counts the writes of its own connection: the write goes to the
// master of its slot, on a connection of that master's pool. An answer
// that the write did not run there (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: a
// migration or a failover) sends the whole conversation again, to the
// master the refreshed map names, until the deadline.
void ClientCore::submit_dedicated_in_cluster(std::string first, DedicatedConnections::Next next,
                                             DedicatedConnections::Done done, Clock::time_point deadline) {
    auto redirected = [](std::error_code ec, const std::vector<Reply>& replies) {
        // No master known for the slot yet (no map yet, or a failover under
        // way): nothing was sent; wait for the map within the deadline.
        if (ec == errc::cluster_down && replies.empty()) return true;
        if (!ec || replies.size() != 1 || !replies[0].is_error()) return false;
        const std::string_view text = replies[0].text;
        for (std::string_view prefix : {"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"})
            if (text.substr(0, prefix.size()) == prefix) return true;
        return false;
    };
    done = [weak = weak_from_this(), first, next, done = std::move(done), deadline, redirected](
               std::error_code ec, std::vector<Reply>&& replies) mutable {
        auto self = weak.lock();
        // A pool left busy by the last map change may be let go now.
        if (self && self->pools_to_retire_.load(std::memory_order_relaxed)) self->retire_unused_node_pools();
        constexpr auto pause = std::chrono::milliseconds(50);
        if (!self || !redirected(ec, replies) || Clock::now() + pause >= deadline) return done(ec, std::move(replies));
        self->cluster_->refresh_soon();
        auto timer = std::make_shared<asio::steady_timer>(self->io_, pause);
        timer->async_wait([weak, timer, first = std::move(first), next = std::move(next), done = std::move(done),
                           deadline](std::error_code timer_ec) mutable {
            auto core = weak.lock();
            if (timer_ec || !core) return done(errc::client_closed, {});
            core->submit_dedicated_in_cluster(std::move(first), std::move(next), std::move(done), deadline);
        });
    };
    route_dedicated_in_cluster(std::move(first), std::move(next), std::move(done), deadline);
}

void ClientCore::route_dedicated_in_cluster(std::string first, DedicatedConnections::Next next,
                                            DedicatedConnections::Done done, Clock::time_point deadline) {
    std::optional<ServerAddress> master;
    if (auto key = routing_key(first)) master = cluster_->master_for_slot(key_slot(*key));
    if (!master) {
        cluster_->refresh_soon();
        return done(errc::cluster_down, {});
    }
    {
        std::lock_guard lock(node_dedicated_mutex_);
        if (node_dedicated_closed_) return done(errc::client_closed, {});
        auto& slot = node_dedicated_[master->host + ":" + std::to_string(master->port)];
        if (!slot) slot = std::make_shared<DedicatedConnections>(io_, *master, options_);
        // Under the lock, so retire_unused_node_pools cannot close it between
        // (submit never completes synchronously).
        slot->submit(std::move(first), std::move(next), std::move(done), deadline);
    }
}

ClientCore::ClusterFootprint ClientCore::cluster_footprint() {
    ClusterFootprint footprint;
    if (cluster_) footprint.router_nodes = cluster_->node_count();
    if (subscriber_made_.load(std::memory_order_acquire)) footprint.subscriber_shards = subscriber_->shard_count();
    std::lock_guard lock(node_dedicated_mutex_);
    footprint.node_pools = node_dedicated_.size();
    return footprint;
}

// The pools of nodes that serve no slot now, once no conversation is on
// them: over a long life a cluster's nodes change address.
void ClientCore::retire_unused_node_pools() {
    std::set<std::string> masters;
    for (const auto& master : cluster_->masters()) masters.insert(master.host + ":" + std::to_string(master.port));
    std::lock_guard lock(node_dedicated_mutex_);
    bool busy = false;
    std::erase_if(node_dedicated_, [&](auto& entry) {
        if (masters.count(entry.first)) return false;
        if (entry.second->shutdown_if_unused()) return true;
        busy = true;  // a conversation is on it: tried again when one ends
        return false;
    });
    pools_to_retire_.store(busy, std::memory_order_relaxed);
}

void ClientCore::eval_many(const Script& script, std::vector<EvalCall>& calls) {
    if (calls.empty()) return;
    const auto until = deadline();
    std::vector<std::string> formatted(calls.size());
    std::vector<Completion> dones;
    dones.reserve(calls.size());
    auto self = weak_from_this();
    for (std::size_t i = 0; i < calls.size(); ++i) {
        std::vector<std::string_view> keys(calls[i].keys.begin(), calls[i].keys.end());
        std::vector<std::string_view> argv(calls[i].argv.begin(), calls[i].argv.end());
        append_eval(formatted[i], "EVALSHA", script.sha1(), keys, argv);
        dones.push_back(NoScriptDetour{self, script, formatted[i], std::move(calls[i].done), until});
    }
    std::vector<std::string_view> views(formatted.begin(), formatted.end());
    submit_many(views, dones);
}

void ClientCore::submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones) {
    submit_many(formatted, dones, deadline());
}

void ClientCore::submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                             Clock::time_point until) {
    if (dones.empty()) return;
    std::error_code ec = usable();
    if (!ec)
        ec = cluster_ ? cluster_->submit_many(formatted, dones, until) : commands_->submit_many(formatted, dones, until);
    if (!ec) return;
    for (auto& done : dones)
        if (done) fail_soon(done, ec);
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
    std::call_once(subscriber_once_, [this] {
        auto subscriber = cluster_ ? std::make_shared<Subscriber>(io_, address_, options_, cluster_)
                                   : std::make_shared<Subscriber>(io_, address_, options_, locator_);
        subscriber->set_io_thread(io_thread_id_);
        subscriber->start();
        subscriber_ = std::move(subscriber);
        subscriber_made_.store(true, std::memory_order_release);
    });
    return subscriber_->add(std::move(channel), std::move(listener));
}

std::error_code ClientCore::wait_connected(Clock::time_point deadline) {
    if (auto ec = usable()) return ec;
    const auto until = std::min(deadline, Clock::now() + options_.connect_timeout + options_.command_timeout);
    return cluster_ ? cluster_->wait_connected(until) : commands_->wait_connected(until);
}

}  // namespace dlock::detail
