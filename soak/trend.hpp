// Whether a series of samples grows: the least-squares slope, projected
// over the window it was measured in, against the series' own level. A
// slope is robust to the single dips and peaks a restart makes.
#pragma once

#include <algorithm>
#include <vector>

namespace dlock::soak {

struct Point {
    double minutes;
    double value;
};

struct Trend {
    double first = 0, last = 0, mean = 0;
    double slope_per_minute = 0;
    double growth = 0;  // slope × the window's length
    bool rising = false;
};

// rising: growth over the window beyond `relative` of the mean and beyond
// `absolute` (noise on a small series).
inline Trend trend_of(const std::vector<Point>& points, double relative, double absolute) {
    Trend t;
    if (points.size() < 3) return t;
    double sx = 0, sy = 0;
    for (const auto& p : points) {
        sx += p.minutes;
        sy += p.value;
    }
    const double n = static_cast<double>(points.size());
    const double mx = sx / n, my = sy / n;
    double sxy = 0, sxx = 0;
    for (const auto& p : points) {
        sxy += (p.minutes - mx) * (p.value - my);
        sxx += (p.minutes - mx) * (p.minutes - mx);
    }
    t.first = points.front().value;
    t.last = points.back().value;
    t.mean = my;
    t.slope_per_minute = sxx > 0 ? sxy / sxx : 0;
    t.growth = t.slope_per_minute * (points.back().minutes - points.front().minutes);
    t.rising = t.growth > std::max(relative * my, absolute);
    return t;
}

}  // namespace dlock::soak
