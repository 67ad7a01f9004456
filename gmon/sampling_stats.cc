#include "gmon/sampling_stats.h"

#include <algorithm>
#include <cmath>

namespace rackprof::gmon {
namespace {

// The continued fraction of the incomplete beta function (modified Lentz), converging for
// x < (a + 1) / (a + b + 2).
double beta_continued_fraction(double a, double b, double x) {
    constexpr double kTiny = 1e-300, kEpsilon = 1e-15;
    double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
    d = 1.0 / (std::fabs(d) < kTiny ? kTiny : d);
    double h = d;
    for (int m = 1; m <= 100000; ++m) {
        const double m2 = 2.0 * m;
        for (const double numerator : {m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                                       -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))}) {
            d = 1.0 + numerator * d;
            d = 1.0 / (std::fabs(d) < kTiny ? kTiny : d);
            c = 1.0 + numerator / c;
            if (std::fabs(c) < kTiny) c = kTiny;
            h *= d * c;
        }
        if (std::fabs(d * c - 1.0) < kEpsilon) break;
    }
    return h;
}

// I_x(a, b), the regularized incomplete beta function.
double incomplete_beta(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                  a * std::log(x) + b * std::log1p(-x));
    if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
    return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

constexpr std::uint64_t kExactTrials = 1'000'000;

double normal_upper(double z) {
    return 0.5 * std::erfc(z / std::sqrt(2.0));
}

}  // namespace

std::pair<double, double> wilson_interval(std::uint64_t k, std::uint64_t n, double z) {
    return wilson_interval_of_credit(static_cast<double>(k), static_cast<double>(n), z);
}

std::pair<double, double> wilson_interval_of_credit(double k, double n, double z) {
    if (!(n > 0)) return {0.0, 1.0};
    const double nn = n, p = std::clamp(k / nn, 0.0, 1.0), z2 = z * z;
    const double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
    const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / (1 + z2 / nn);
    return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

double binomial_upper_tail(std::uint64_t k, std::uint64_t n, double p) {
    if (k == 0) return 1.0;
    if (k > n) return 0.0;
    if (p <= 0) return 0.0;
    if (p >= 1) return 1.0;
    if (n > kExactTrials) {
        const double mean = static_cast<double>(n) * p;
        const double sd = std::sqrt(mean * (1 - p));
        return normal_upper((static_cast<double>(k) - 0.5 - mean) / sd);
    }
    // P(X >= k) = I_p(k, n - k + 1).
    return std::clamp(incomplete_beta(static_cast<double>(k), static_cast<double>(n - k + 1), p),
                      0.0, 1.0);
}

double binomial_lower_tail(std::uint64_t k, std::uint64_t n, double p) {
    if (k >= n) return 1.0;
    return std::clamp(1.0 - binomial_upper_tail(k + 1, n, p), 0.0, 1.0);
}

double binomial_two_sided(std::uint64_t k, std::uint64_t n, double p) {
    return std::min(1.0,
                    2.0 * std::min(binomial_upper_tail(k, n, p), binomial_lower_tail(k, n, p)));
}

namespace {
double null_share(double e_a, double e_b, double r) {
    return r * e_b / (e_a + r * e_b);
}
}  // namespace

double rate_ratio_two_sided(std::uint64_t k_a, double e_a, std::uint64_t k_b, double e_b) {
    if (k_a + k_b == 0 || e_a <= 0 || e_b <= 0) return 1.0;
    return binomial_two_sided(k_b, k_a + k_b, null_share(e_a, e_b, 1.0));
}

double rate_ratio_above(std::uint64_t k_a, double e_a, std::uint64_t k_b, double e_b, double r) {
    if (k_a + k_b == 0 || e_a <= 0 || e_b <= 0) return 1.0;
    return binomial_upper_tail(k_b, k_a + k_b, null_share(e_a, e_b, r));
}

double rate_ratio_below(std::uint64_t k_a, double e_a, std::uint64_t k_b, double e_b, double r) {
    if (k_a + k_b == 0 || e_a <= 0 || e_b <= 0) return 1.0;
    return binomial_lower_tail(k_b, k_a + k_b, null_share(e_a, e_b, r));
}

}  // namespace rackprof::gmon
