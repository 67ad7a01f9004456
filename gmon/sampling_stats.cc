#include "gmon/sampling_stats.h"

#include <boost/math/distributions/binomial.hpp>

#include <algorithm>
#include <cmath>

namespace rackprof::gmon {
namespace {

// A p that is NaN gives NaN rather than an exception: a report shows it, it does not abort.
// Computed in double, not promoted to long double: a two-sided test then costs 0.3 us rather
// than 3.5 (the fleet spread runs one per function and board), and stays within 1e-9 (relative)
// of the long double result up to 3 * 10^7 trials.
namespace policies = boost::math::policies;
using TailPolicy = policies::policy<policies::domain_error<policies::ignore_error>,
                                    policies::promote_double<false>>;
using Binomial = boost::math::binomial_distribution<double, TailPolicy>;

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
    // P(X >= k) = P(X > k - 1), from the complement itself: no 1 - cdf cancellation in the tail.
    return boost::math::cdf(
        boost::math::complement(Binomial(static_cast<double>(n), p), static_cast<double>(k - 1)));
}

double binomial_lower_tail(std::uint64_t k, std::uint64_t n, double p) {
    if (k >= n) return 1.0;
    if (p <= 0) return 1.0;
    if (p >= 1) return 0.0;
    return boost::math::cdf(Binomial(static_cast<double>(n), p), static_cast<double>(k));
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
