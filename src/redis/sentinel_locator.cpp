#include "sentinel_locator.hpp"

#include <algorithm>
#include <charconv>

#include "command_format.hpp"
#include "reported_address.hpp"
#include "connection.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

bool same_server(const ServerAddress& a, const ServerAddress& b) { return a.host == b.host && a.port == b.port; }

std::string endpoint_text(const ServerAddress::Endpoint& e) {
    return (e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

}  // namespace

SentinelLocator::SentinelLocator(asio::io_context& io, ServerAddress address, ClientOptions options)
    : io_(io),
      address_(std::move(address)),
      options_(std::move(options)),
      poll_timer_(io) {
    for (const auto& endpoint : address_.endpoints) sentinels_.push_back({endpoint});
    if (sentinels_.empty()) sentinels_.push_back({{address_.host, address_.port}});
}

SentinelLocator::~SentinelLocator() = default;

ServerAddress SentinelLocator::sentinel_address(std::size_t index) const {
    ServerAddress sentinel;
    sentinel.transport = address_.transport;
    sentinel.host = sentinels_[index].endpoint.host;
    sentinel.port = sentinels_[index].endpoint.port;
    sentinel.username = options_.sentinel_username;
    sentinel.password = options_.sentinel_password;
    return sentinel;
}

void SentinelLocator::start() {
    asio::post(io_, [self = shared_from_this()] {
        if (self->shut_down_) return;
        self->watch_switches();
        self->poll_timer_.expires_after(self->options_.sentinel_poll_interval);
        self->poll_timer_.async_wait([self](std::error_code ec) {
            if (!ec) self->poll();
        });
    });
}

void SentinelLocator::shutdown() {
    shut_down_ = true;
    poll_timer_.cancel();
    if (query_) query_->shutdown();
    if (switches_) switches_->shutdown();
    query_.reset();
    switches_.reset();
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& found : waiting) found(errc::client_closed, {}, "client closed");
    listeners_.clear();
}

void SentinelLocator::locate(Found found) {
    if (shut_down_) return found(errc::client_closed, {}, "client closed");
    waiting_.push_back(std::move(found));
    if (!round_under_way_) start_round();
}

void SentinelLocator::not_master(const ServerAddress& seen) {
    // The sentinels will be asked again by the next attempt; a master they
    // still name is checked with ROLE again. The next round starts with the
    // next sentinel: the one that named this server may be alone in its
    // view (stale, partitioned), and asking it first again would pin every
    // attempt to the same unusable answer.
    if (!master_ || !same_server(*master_, seen)) return;
    master_.reset();
    if (!sentinels_.empty()) current_ = (current_ + 1) % sentinels_.size();
}

void SentinelLocator::on_change(ChangeListener listener) { listeners_.push_back(std::move(listener)); }

void SentinelLocator::start_round() {
    round_under_way_ = true;
    round_first_ = current_;
    round_errors_.clear();
    round_codes_.clear();
    ask(0);
}

void SentinelLocator::use_sentinel(std::size_t index) {
    if (query_ && query_index_ == index) return;
    if (query_) query_->shutdown();
    auto options = options_;
    options.client_name = options_.client_name.empty() ? std::string() : options_.client_name + ":sentinel";
    query_ = std::make_shared<Connection>(io_, sentinel_address(index), std::move(options),
                                          Connection::Mode::request_reply);
    query_index_ = index;
    query_->start();
}

void SentinelLocator::ask(std::size_t tried) {
    if (tried == sentinels_.size()) {
        std::error_code common = round_codes_.empty() ? make_error_code(errc::no_master) : round_codes_.front();
        for (auto& code : round_codes_)
            if (code != common) common = errc::no_master;
        std::string detail = "no sentinel named master '" + address_.master_name + "':";
        for (auto& error : round_errors_) detail += " " + error + ";";
        detail.pop_back();
        return finish_round(common, detail);
    }
    // From where this round began: current_ may move meanwhile (not_master).
    const auto index = (round_first_ + tried) % sentinels_.size();
    use_sentinel(index);
    std::string bytes;
    const std::string_view args[] = {"SENTINEL", "get-master-addr-by-name", address_.master_name};
    append_command(bytes, args);
    // One sentinel may take a connect and a command: bounded by the smaller,
    // so a dead sentinel costs a connect timeout and the next is asked.
    const auto deadline = Clock::now() + std::min(options_.connect_timeout, options_.command_timeout);
    Completion done = [self = shared_from_this(), index, tried](std::error_code ec, Reply&& reply) {
        // Completions run on the I/O thread, or inline below.
        self->on_answer(index, tried, ec, reply);
    };
    if (auto ec = query_->submit(bytes, done, deadline)) {
        Reply detail = Reply::make_error(query_->last_error_detail());
        on_answer(index, tried, ec, detail);
    }
}

void SentinelLocator::on_answer(std::size_t index, std::size_t tried, std::error_code ec, const Reply& reply) {
    if (shut_down_ || !round_under_way_) return;
    const auto who = endpoint_text(sentinels_[index].endpoint);
    if (!ec && reply.is_array() && reply.elements.size() == 2 && reply.elements[0].is_text() &&
        reply.elements[1].is_text() && plausible_host(reply.elements[0].text)) {
        if (auto port = reported_port(reply.elements[1].text)) {
            current_ = index;  // ask this one first next time
            set_master(address_.node(reply.elements[0].text, *port));
            return finish_round({}, {});
        }
    }
    // A learnt sentinel that is gone (or unreachable from here) would cost
    // every later round a timeout: it goes when this round ends.
    if (ec && ec != errc::auth_failed && ec != errc::permission_denied && sentinels_[index].learnt)
        sentinels_[index].silent = true;
    std::string why;
    if (ec) why = ec.message() + (reply.is_error() && !reply.text.empty() ? " (" + reply.text + ")" : "");
    else if (reply.is_nil()) why = "does not know it";
    else why = "answered something that is not an address";
    round_errors_.push_back(who + " " + why);
    round_codes_.push_back(ec ? ec : make_error_code(errc::no_master));
    ask(tried + 1);
}

void SentinelLocator::finish_round(std::error_code ec, const std::string& detail) {
    round_under_way_ = false;
    drop_silent();
    auto waiting = std::move(waiting_);
    waiting_.clear();
    const ServerAddress master = master_.value_or(ServerAddress{});
    for (auto& found : waiting) found(ec, master, detail);
    // The sentinel that answers now may not be the one we watch.
    if (!ec && switches_ && switches_index_ != current_) watch_switches();
}

void SentinelLocator::drop_silent() {
    if (std::none_of(sentinels_.begin(), sentinels_.end(), [](const Known& k) { return k.silent; })) return;
    const std::size_t gone = sentinels_.size();  // an index that names no sentinel
    std::vector<std::size_t> moved(sentinels_.size(), gone);
    std::vector<Known> kept;
    for (std::size_t i = 0; i < sentinels_.size(); ++i) {
        if (sentinels_[i].silent) continue;
        moved[i] = kept.size();
        kept.push_back(std::move(sentinels_[i]));
    }
    sentinels_ = std::move(kept);  // never empty: the URI's sentinels stay
    // The sentinel asked first: itself, or the one after it that stayed.
    std::size_t next = current_;
    while (next < moved.size() && moved[next] == gone) ++next;
    current_ = next < moved.size() ? moved[next] : 0;
    if (query_ && moved[query_index_] == gone) {
        query_->shutdown();
        query_.reset();
    } else if (query_) {
        query_index_ = moved[query_index_];
    }
    if (!switches_) return;
    if (moved[switches_index_] != gone) switches_index_ = moved[switches_index_];
    else watch_switches();  // it watched a dropped sentinel: watch the one asked first
}

void SentinelLocator::set_master(const ServerAddress& master) {
    const bool changed = last_named_ && !same_server(*last_named_, master);
    master_ = master;
    last_named_ = master;
    if (!changed) return;
    for (auto it = listeners_.begin(); it != listeners_.end();) {
        if ((*it)(master)) ++it;
        else it = listeners_.erase(it);
    }
}

void SentinelLocator::watch_switches() {
    if (switches_) switches_->shutdown();
    Connection::Hooks hooks;
    std::weak_ptr<SentinelLocator> weak = shared_from_this();
    hooks.on_ready = [weak] {
        auto self = weak.lock();
        if (!self || !self->switches_) return;
        std::string bytes;
        const std::string_view args[] = {"SUBSCRIBE", "+switch-master"};
        append_command(bytes, args);
        self->switches_->send_if_ready(bytes);
    };
    hooks.on_push = [weak](Reply&& push) {
        if (auto self = weak.lock()) self->on_switch_message(push);
    };
    auto options = options_;
    options.client_name = options_.client_name.empty() ? std::string() : options_.client_name + ":sentinel-sub";
    switches_index_ = current_;
    switches_ = std::make_shared<Connection>(io_, sentinel_address(switches_index_), std::move(options),
                                             Connection::Mode::subscriber, std::move(hooks));
    switches_->start();
}

// "<master-name> <old-ip> <old-port> <new-ip> <new-port>"
void SentinelLocator::on_switch_message(const Reply& push) {
    if (shut_down_ || !push.is_array() || push.elements.size() != 3 || push.elements[0].text != "message") return;
    std::string_view text = push.elements[2].text;
    std::vector<std::string_view> words;
    while (!text.empty() && words.size() < 6) {
        auto space = text.find(' ');
        words.push_back(text.substr(0, space));
        text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
    }
    if (words.size() != 5 || words[0] != address_.master_name || !plausible_host(words[3])) return;
    if (auto port = reported_port(words[4])) set_master(address_.node(std::string(words[3]), *port));
}

void SentinelLocator::poll() {
    if (shut_down_) return;
    // A round with nobody waiting: it only refreshes master_ (and tells the
    // listeners of a change).
    if (!round_under_way_) start_round();
    // Now and then, the sentinels the current one knows of.
    if (++polls_ % 10 == 1 && query_) {
        std::string bytes;
        const std::string_view args[] = {"SENTINEL", "sentinels", address_.master_name};
        append_command(bytes, args);
        Completion done = [weak = weak_from_this()](std::error_code ec, Reply&& reply) {
            if (auto self = weak.lock(); self && !ec && !self->shut_down_) self->learn_sentinels(reply);
        };
        static_cast<void>(query_->submit(bytes, done, Clock::now() + options_.command_timeout));
    }
    // A watch on a sentinel that went away: follow the one that answers.
    if (switches_ && switches_index_ != current_) watch_switches();
    poll_timer_.expires_after(options_.sentinel_poll_interval);
    poll_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
        if (!ec) self->poll();
    });
}

// An array of flat field/value arrays; "ip", "port" and "flags" matter.
// A sentinel the reporter sees as down or disconnected is not learnt: it
// would cost a round a timeout.
void SentinelLocator::learn_sentinels(const Reply& reply) {
    if (!reply.is_array()) return;
    for (const auto& entry : reply.elements) {
        if (!entry.is_array()) continue;
        std::string_view ip, port_text, flags;
        for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
            if (entry.elements[i].text == "ip") ip = entry.elements[i + 1].text;
            if (entry.elements[i].text == "port") port_text = entry.elements[i + 1].text;
            if (entry.elements[i].text == "flags") flags = entry.elements[i + 1].text;
        }
        auto port = reported_port(port_text);
        if (!port || !plausible_host(ip)) continue;
        if (flags.find("s_down") != std::string_view::npos || flags.find("o_down") != std::string_view::npos ||
            flags.find("disconnected") != std::string_view::npos)
            continue;
        ServerAddress::Endpoint endpoint{std::string(ip), *port};
        if (std::any_of(sentinels_.begin(), sentinels_.end(), [&](const Known& k) { return k.endpoint == endpoint; }))
            continue;
        if (sentinels_.size() >= ServerAddress::max_endpoints) return;
        sentinels_.push_back({std::move(endpoint), true});
    }
}

}  // namespace dlock::detail
