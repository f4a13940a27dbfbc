// dlock/script.hpp — a Lua script known by its text and SHA1.
//
// Client::eval sends EVALSHA and falls back to EVAL once when the server
// answers NOSCRIPT (after SCRIPT FLUSH, a restart or a failover), so callers
// never see NOSCRIPT. A Script is immutable and cheap to copy (it shares its
// text); make it once and reuse it from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace dlock {

class Script {
public:
    // Computes the SHA1 of text.
    explicit Script(std::string text);
    // For texts whose SHA1 (lower-case hex) was computed at build time.
    Script(std::string text, std::string sha1);
    // The same, with a second text that a client of a Redis Cluster sends
    // instead (for_cluster). dlock's own scripts that publish notices have
    // one: there they publish by sharded pub/sub (SPUBLISH), as the client
    // subscribes. A cluster_sha1 equal to sha1 makes no second script.
    Script(std::string text, std::string sha1, std::string cluster_text, std::string cluster_sha1);

    const std::string& text() const noexcept { return data_->text; }
    const std::string& sha1() const noexcept { return data_->sha1; }
    // What a client of a Redis Cluster sends: the cluster text's script
    // where there is one, else this one. A client of one server (or of a
    // Sentinel-managed master) sends this one.
    const Script& for_cluster() const noexcept { return data_->cluster ? *data_->cluster : *this; }

private:
    struct Data {
        std::string text;
        std::string sha1;
        std::shared_ptr<const Script> cluster;
    };
    std::shared_ptr<const Data> data_;
};

// Lower-case hex SHA1 of data.
std::string sha1_hex(std::string_view data);

}  // namespace dlock
