// What a Client shares with dlock's other layers: the I/O thread, the
// topology (topology.hpp: where commands, conversations and channels go),
// the subscriber, and blocking calls built on them.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "asio.hpp"
#include "client_extension.hpp"
#include "runtime/fiber_runner.hpp"
#include "cluster_router.hpp"  // cluster()
#include "connection.hpp"
#include "dedicated_connections.hpp"
#include "metrics/recorder.hpp"
#include "dlock/client_options.hpp"
#include "dlock/script.hpp"
#include "known_scripts.hpp"
#include "dlock/server_address.hpp"
#include "fork_guard.hpp"
#include "io_loop.hpp"
#include "subscriber.hpp"
#include "topology.hpp"

namespace dlock::detail {

class ClientCore : public std::enable_shared_from_this<ClientCore> {
public:
    using Args = std::span<const std::string_view>;

    // The one way to make a core: its last reference, dropped in a forked
    // child, keeps it instead of destroying it (see fork_guard.hpp). With a
    // loop, the core runs on that loop beside its other members (a Redlock's
    // masters), and its owner runs the loop once every member has started;
    // without, on a loop of its own, which start() runs.
    static std::shared_ptr<ClientCore> create(ServerAddress address, ClientOptions options,
                                              std::shared_ptr<IoLoop> loop = nullptr);
    ~ClientCore();

    void start();
    // Fails all in-flight work with client_closed and closes the
    // connections; the last core on its loop also joins the I/O thread.
    void stop();

    // forked_child or client_closed when the client cannot be used.
    std::error_code usable() const noexcept;
    // The thread of this client's asynchronous operations (dlock/async.hpp),
    // started on first use; null once the client is closing. Any thread.
    std::shared_ptr<FiberRunner> fiber_runner();
    bool forked() const noexcept;

    // Asynchronous: done runs on the I/O thread exactly once.
    void submit(Args args, Completion done);
    void submit_formatted(std::string_view formatted, Completion done, Clock::time_point deadline);
    void eval_async(const Script& script, Args keys, Args argv, Completion done);
    void eval_async(const Script& script, Args keys, Args argv, Completion done, Clock::time_point deadline);

    // Blocking, never longer than command_timeout.
    Reply call(Args args, std::error_code& ec) noexcept;
    Reply eval(const Script& script, Args keys, Args argv, std::error_code& ec) noexcept;

    // Several script calls in one write; each done runs once.
    struct EvalCall {
        std::vector<std::string> keys;
        std::vector<std::string> argv;
        Completion done;
    };
    void eval_many(const Script& script, std::vector<EvalCall>& calls);
    // Formatted commands that leave in one write; each done runs once. No
    // NOSCRIPT fallback: a caller sending EVALSHA this way handles it.
    void submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones);
    void submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                     Clock::time_point deadline);

    Subscription subscribe(std::string channel, Subscription::Listener listener);

    // A conversation on a connection of its own (see dedicated_connections.hpp):
    // a write, then the WAIT that counts it, when the write's reply asks for one.
    // done runs once; at once, on the calling thread, when the client is closed.
    void submit_dedicated(std::string first, DedicatedConnections::Next next, DedicatedConnections::Done done,
                          Clock::time_point deadline);

    // The client's T, a layer above the transport's state (the lock
    // service): made once, on first use, and kept as long as the core.
    template <std::derived_from<ClientExtension> T, std::invocable Make>
    std::shared_ptr<T> extension(Make&& make) {
        return extensions_.get<T>(std::forward<Make>(make));
    }
    // Runs, on the stopping thread, before the connections close: the lock
    // service releases what this client still holds.
    void before_stop(std::function<void()> hook);
    // Runs on the I/O thread as the client shuts down: cancel timers there,
    // or the I/O thread would wait for them.
    void on_io_shutdown(std::function<void()> hook);
    // Runs on the I/O thread when the server behind this client changed (a
    // Sentinel failover), after the connections to the old one dropped: the
    // lock layer revalidates its holds at once.
    void on_failover(std::function<void()> hook);
    // Until the connect attempt ends, at most a connect and a command timeout, or `deadline`.
    std::error_code wait_connected(Clock::time_point deadline = Clock::time_point::max());

    // The text of script this client sends (Script::for_cluster): a
    // client of a Redis Cluster sends the one that publishes by sharded
    // pub/sub, as its subscriber listens. Every call that sends a script
    // sends this one, and keeps it for a NOSCRIPT detour.
    const Script& script_for_server(const Script& script) const noexcept {
        return topology_->sharded() ? script.for_cluster() : script;
    }
    // Whether the server has `script` cached as far as this client knows
    // (known_scripts.hpp), and noting that it has: call on an answer to the
    // script that was not NOSCRIPT, on the I/O thread as it arrives.
    bool script_cached(const Script& script) const {
        // In a cluster each master has its own cache: nothing counts as known.
        auto session = topology_->script_session();
        return session && known_scripts_.known(script.sha1(), *session);
    }
    void note_script_cached(const Script& script) {
        if (auto session = topology_->script_session()) known_scripts_.note(script.sha1(), *session);
    }
    // How a call to a script goes again after a NOSCRIPT answer. As EVAL
    // (the script's text, which also caches it), unless an EVAL of it is
    // unanswered on this session of the command connection: then the
    // server ran this call before that EVAL and reads the call again after
    // it, so it goes as EVALSHA. So
    // a burst of calls answered NOSCRIPT together (every renewal after a
    // restart that lost the data) sends the text once, not once per call
    // (15 MB for a thousand renewals). A call that meets NOSCRIPT again goes
    // as EVAL; one that went as EVAL is not sent again. In a cluster every
    // call goes as EVAL (each master has its own cache).
    struct ScriptResend {
        bool evalsha_again = false;
        bool eval = false;
    };
    // The bytes to send again (evalsha: the call as EVALSHA), or empty when
    // the call already went as EVAL and fails with NOSCRIPT. Counts a
    // script reload. I/O thread, right before submitting what it returns.
    std::string resend_after_no_script(const Script& script, std::string_view evalsha, ScriptResend& resend);
    // Notes an EVAL of script submitted now, and its answer (any, error
    // included): while one is unanswered, a call answered NOSCRIPT ran
    // before it, so goes again as EVALSHA (see resend_after_no_script).
    void note_eval_sent(const Script& script) {
        if (auto session = topology_->script_session()) known_scripts_.note_eval(script.sha1(), *session);
    }
    void note_eval_answered(const Script& script) {
        if (auto session = topology_->script_session()) known_scripts_.note_eval_answered(script.sha1(), *session);
    }
    std::string last_connect_error() const { return topology_->last_error_detail(); }
    // Where a command on key goes now, as "host:port" (the master a
    // Sentinel deployment named, the master serving key's slot in a
    // cluster); empty when not known yet. For status output.
    std::string server_for_key(std::string_view key) const { return topology_->server_for_key(key); }
    // The masters a keyspace walk must visit: each master of a cluster;
    // empty otherwise (the one server).
    std::vector<ServerAddress> cluster_masters() const { return topology_->masters(); }
    // One command to one master of the cluster, blocking as call() does.
    Reply call_on(const ServerAddress& master, Args args, std::error_code& ec) noexcept;
    // Cluster only (else null): the slot map, for status output and tests.
    const std::shared_ptr<ClusterRouter>& cluster() const noexcept { return topology_->cluster_router(); }
    // Cluster: what this client keeps per node now (diagnostics, tests).
    struct ClusterFootprint {
        std::size_t router_nodes = 0;       // command connections
        std::size_t subscriber_shards = 0;  // subscriber connections
        std::size_t node_pools = 0;         // pools of dedicated connections
    };
    ClusterFootprint cluster_footprint();

    asio::io_context& io() noexcept { return loop_->io(); }
    // The thread this core's I/O runs on: its own, or the one its loop's
    // other members share.
    bool on_io_thread() const noexcept { return loop_->on_io_thread(); }
    const std::shared_ptr<IoLoop>& loop() const noexcept { return loop_; }
    Clock::time_point deadline() const noexcept { return Clock::now() + options_.command_timeout; }

    const ServerAddress& address() const noexcept { return address_; }
    const ClientOptions& options() const noexcept { return options_; }
    // Never null.
    const std::shared_ptr<Metrics>& metrics() const noexcept { return options_.metrics; }
    MetricsRecorder& recorder() const noexcept { return options_.metrics->recorder(); }

    // A blocking caller whose DriveScope claimed a parked connection reads
    // its own replies on this thread (connection.hpp, the read baton) until
    // done is acquired or deadline: no wake-up by the I/O thread. False
    // when it could not drive or done was not acquired by then.
    template <typename Semaphore>
    static bool drive_for(Semaphore& done, Clock::time_point deadline) {
        auto* scope = DriveScope::current();
        return scope && scope->drive([&] { return done.try_acquire(); }, deadline);
    }
    // A DriveScope for a blocking caller of this client: none in a fiber or
    // on the I/O thread, which must not read for themselves.
    bool may_drive() const noexcept { return !Fiber::current() && !on_io_thread(); }

private:
    ClientCore(ServerAddress address, ClientOptions options, std::shared_ptr<IoLoop> loop);

    // Runs done with ec later on the I/O thread; at once in a forked child, or
    // once the I/O thread has ended (the client closed).
    void fail_soon(Completion& done, std::error_code ec);
    template <typename Start>
    Reply wait_for(Start start, std::error_code& ec) noexcept;
    void shutdown_on_io_thread();
    void run_failover_hooks();

    const ServerAddress address_;
    const ClientOptions options_;
    const ForkGuard fork_guard_;

    const bool own_loop_;  // made for this core alone: start() runs it
    // Before every member that refers to its io_context: destroyed after them.
    const std::shared_ptr<IoLoop> loop_;  // never null
    std::atomic<bool> stopped_{false};

    std::shared_ptr<Topology> topology_;  // never null
    // Made on the first subscribe() and shut down with the client: made and
    // read under one lock, and never made once the shutdown has read it.
    std::mutex subscriber_mutex_;
    std::shared_ptr<Subscriber> subscriber_;
    bool subscriber_closed_ = false;  // the shutdown took subscriber_
    std::mutex fiber_mutex_;
    std::shared_ptr<FiberRunner> fibers_;
    bool fibers_closed_ = false;
    ClientExtensions extensions_;
    std::mutex hooks_mutex_;
    std::vector<std::function<void()>> before_stop_;
    std::vector<std::function<void()>> on_io_shutdown_;
    std::vector<std::function<void()>> on_failover_;
    KnownScripts known_scripts_;
};

}  // namespace dlock::detail
