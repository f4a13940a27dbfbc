// Metrics: the public face of the recorder, and the Prometheus text format.
#include "dlock/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "recorder.hpp"

namespace dlock {
namespace {

void append_number(std::string& out, double value) {
    if (std::isinf(value)) {
        out += value > 0 ? "+Inf" : "-Inf";
        return;
    }
    if (std::isnan(value)) {
        out += "NaN";
        return;
    }
    // Fixed notation where it stays short (bounds read "0.0005", not "5e-04").
    char buffer[400];
    const auto format = std::fabs(value) < 1e15 ? std::chars_format::fixed : std::chars_format::general;
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, format);
    if (ec == std::errc{}) out.append(buffer, end);
    else out += "0";
}

// Label values may hold any byte of a lock name: backslash, double quote and
// line feed are escaped as the format asks.
void append_escaped(std::string& out, std::string_view text) {
    for (char c : text) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
}

// HELP text: backslash and line feed escaped.
void append_help(std::string& out, std::string_view text) {
    for (char c : text) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
}

void append_labels(std::string& out, const std::vector<std::pair<std::string_view, std::string_view>>& labels,
                   std::string_view extra_name = {}, std::string_view extra_value = {}) {
    if (labels.empty() && extra_name.empty()) return;
    out += '{';
    bool first = true;
    auto one = [&](std::string_view name, std::string_view value) {
        if (!first) out += ',';
        first = false;
        out += name;
        out += "=\"";
        append_escaped(out, value);
        out += '"';
    };
    for (const auto& [name, value] : labels) one(name, value);
    if (!extra_name.empty()) one(extra_name, extra_value);
    out += '}';
}

std::string_view type_name(Metrics::Type type) {
    switch (type) {
        case Metrics::Type::counter: return "counter";
        case Metrics::Type::gauge: return "gauge";
        case Metrics::Type::histogram: return "histogram";
    }
    return "untyped";
}

}  // namespace

Metrics::Metrics(MetricsOptions options) : recorder_(std::make_unique<detail::MetricsRecorder>(options)) {}

Metrics::~Metrics() = default;

const MetricsOptions& Metrics::options() const noexcept { return recorder_->options(); }

void Metrics::collect(const std::function<void(const Family&)>& visitor) const { recorder_->collect(visitor); }

void Metrics::set_sink(std::function<void(const Observation&)> sink) { recorder_->set_sink(std::move(sink)); }

std::string Metrics::prometheus_text() const {
    std::string out;
    collect([&](const Family& family) {
        out += "# HELP ";
        out += family.name;
        out += ' ';
        append_help(out, family.help);
        out += "\n# TYPE ";
        out += family.name;
        out += ' ';
        out += type_name(family.type);
        out += '\n';
        for (const auto& series : family.series) {
            if (family.type != Type::histogram) {
                out += family.name;
                append_labels(out, series.labels);
                out += ' ';
                append_number(out, series.value);
                out += '\n';
                continue;
            }
            for (const auto& [bound, count] : series.buckets) {
                out += family.name;
                out += "_bucket";
                std::string le;
                append_number(le, bound);
                append_labels(out, series.labels, "le", le);
                out += ' ';
                out += std::to_string(count);
                out += '\n';
            }
            out += family.name;
            out += "_sum";
            append_labels(out, series.labels);
            out += ' ';
            append_number(out, series.value);
            out += '\n';
            out += family.name;
            out += "_count";
            append_labels(out, series.labels);
            out += ' ';
            out += std::to_string(series.count);
            out += '\n';
        }
    });
    return out;
}

double Metrics::value(std::string_view family,
                      const std::vector<std::pair<std::string_view, std::string_view>>& labels) const {
    double found = 0;
    collect([&](const Family& f) {
        if (f.name != family) return;
        for (const auto& series : f.series) {
            if (series.labels.size() != labels.size()) continue;
            bool all = true;
            for (const auto& wanted : labels)
                all &= std::find(series.labels.begin(), series.labels.end(), wanted) != series.labels.end();
            if (all) found = f.type == Type::histogram ? static_cast<double>(series.count) : series.value;
        }
    });
    return found;
}

}  // namespace dlock
