#include "dlock/script.hpp"

#include <openssl/evp.h>

#include <stdexcept>

namespace dlock {

std::string sha1_hex(std::string_view data) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha1(), nullptr) != 1)
        throw std::runtime_error("SHA1 digest failed");
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(length * 2);
    for (unsigned int i = 0; i < length; ++i) {
        out.push_back(hex[digest[i] >> 4]);
        out.push_back(hex[digest[i] & 0xf]);
    }
    return out;
}

Script::Script(std::string text) {
    auto sha1 = sha1_hex(text);
    data_ = std::make_shared<const Data>(Data{std::move(text), std::move(sha1), nullptr});
}

Script::Script(std::string text, std::string sha1)
    : data_(std::make_shared<const Data>(Data{std::move(text), std::move(sha1), nullptr})) {}

Script::Script(std::string text, std::string sha1, std::string cluster_text, std::string cluster_sha1) {
    std::shared_ptr<const Script> cluster;
    if (cluster_sha1 != sha1) cluster = std::make_shared<const Script>(std::move(cluster_text), std::move(cluster_sha1));
    data_ = std::make_shared<const Data>(Data{std::move(text), std::move(sha1), std::move(cluster)});
}

}  // namespace dlock
