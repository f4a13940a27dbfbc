#include "dlock/client.hpp"

#include "client_core.hpp"
#include "dlock/error.hpp"

namespace dlock {

Client::Client(std::string_view uri, ClientOptions options) : Client(ServerAddress::parse(uri), std::move(options)) {}

Client::Client(ServerAddress address, ClientOptions options)
    : Client(std::move(address), std::move(options), nullptr) {}

Client::Client(ServerAddress address, ClientOptions options, std::shared_ptr<detail::IoLoop> loop)
    : core_(detail::ClientCore::create(std::move(address), std::move(options), std::move(loop))) {
    core_->start();
}

Client::~Client() {
    // In a forked child there is nothing to stop: the parent's I/O thread and
    // sockets are the parent's (and the core is kept, see ClientCore::create).
    if (!core_->forked()) core_->stop();
}

Reply Client::command(std::initializer_list<std::string_view> args) {
    return command(Args(args.begin(), args.size()));
}

Reply Client::command(Args args) {
    std::error_code ec;
    Reply reply = command(args, ec);
    if (ec) throw Error(ec, reply.is_error() ? reply.text : ec.message());
    return reply;
}

Reply Client::command(Args args, std::error_code& ec) noexcept {
    if (args.empty()) {
        ec = errc::invalid_argument;
        return {};
    }
    return core_->call(args, ec);
}

void Client::submit(Args args, Callback done) {
    if (args.empty()) throw Error(errc::invalid_argument, "empty command");
    core_->submit(args, std::move(done));
}

Reply Client::eval(const Script& script, Args keys, Args argv) {
    std::error_code ec;
    Reply reply = eval(script, keys, argv, ec);
    if (ec) throw Error(ec, reply.is_error() ? reply.text : ec.message());
    return reply;
}

Reply Client::eval(const Script& script, Args keys, Args argv, std::error_code& ec) noexcept {
    return core_->eval(script, keys, argv, ec);
}

void Client::eval_async(const Script& script, Args keys, Args argv, Callback done) {
    core_->eval_async(script, keys, argv, std::move(done));
}

Subscription Client::subscribe(std::string channel, Subscription::Listener listener) {
    if (channel.empty()) throw Error(errc::invalid_argument, "empty channel name");
    if (!listener) throw Error(errc::invalid_argument, "empty listener");
    return core_->subscribe(std::move(channel), std::move(listener));
}

void Client::wait_connected() {
    auto ec = core_->wait_connected();
    if (ec) throw Error(ec, core_->last_connect_error());
}

void Client::wait_connected(std::error_code& ec) noexcept { ec = core_->wait_connected(); }

void Client::wait_connected(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    ec = core_->wait_connected(deadline);
}

const ServerAddress& Client::address() const noexcept { return core_->address(); }

const ClientOptions& Client::options() const noexcept { return core_->options(); }

Metrics& Client::metrics() const noexcept { return *core_->metrics(); }

}  // namespace dlock
