#include "gmon/sampling_stats.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

namespace rackprof::gmon {
namespace {

// Exact binomial probabilities summed term by term (small n only).
double tail_by_sum(std::uint64_t k, std::uint64_t n, double p) {
    double sum = 0;
    for (std::uint64_t i = k; i <= n; ++i) {
        sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) +
                        static_cast<double>(i) * std::log(p) +
                        static_cast<double>(n - i) * std::log1p(-p));
    }
    return sum;
}

TEST_CASE("binomial tails equal the sum of the binomial terms") {
    for (const std::uint64_t n : {1u, 7u, 40u, 300u}) {
        for (const double p : {0.01, 0.3, 0.5, 0.93}) {
            for (std::uint64_t k = 0; k <= n; k += 1 + n / 9) {
                CAPTURE(n);
                CAPTURE(p);
                CAPTURE(k);
                CHECK(binomial_upper_tail(k, n, p) ==
                      doctest::Approx(tail_by_sum(k, n, p)).epsilon(1e-9));
                CHECK(binomial_lower_tail(k, n, p) ==
                      doctest::Approx(1.0 - tail_by_sum(k + 1, n, p)).epsilon(1e-9));
            }
        }
    }
    CHECK(binomial_upper_tail(0, 10, 0.5) == 1.0);
    CHECK(binomial_upper_tail(11, 10, 0.5) == 0.0);
    const double nan = std::numeric_limits<double>::quiet_NaN();  // not an exception
    CHECK(std::isnan(binomial_upper_tail(3, 10, nan)));
    CHECK(std::isnan(binomial_lower_tail(3, 10, nan)));
}

// Reference tails for the double nearest p: exact rational sums of the binomial terms up to
// n = 1000, the terms summed at 60 digits (mpmath) beyond, the two cross-checked where both
// run. They cover k = 0 and k = n, tails far below 1e-100, and n past 10^6, where a normal
// approximation misses the tails (15 or more of 5 * 10^6 at p = 10^-6: 2.3e-4, not 1.1e-5).
TEST_CASE("binomial tails against reference values, k = 0 to n, n = 1 to 10^7") {
    struct Case {
        std::uint64_t k, n;
        double p, upper, lower;  // P(X >= k), P(X <= k)
    };
    const Case cases[] = {
        {0, 10, 0.5, 1.0, 0.0009765625},
        {10, 10, 0.5, 0.0009765625, 1.0},
        {1, 1, 0.3, 0.29999999999999999, 1.0},
        {5, 20, 0.1, 0.04317449528446339, 0.988746865835491},
        {8, 300, 0.01, 0.011474078634877691, 0.99639728784996461},
        {500, 500, 0.3, 3.6360291795869264e-262, 1.0},
        {0, 500, 0.3, 1.0, 3.5401364944952874e-78},
        {600, 1000, 0.5, 1.3642320780330092e-10, 0.99999999990991587},
        {3100, 10000, 0.3, 0.015156387528068862, 0.98565304402320942},
        {1'000'000, 2'000'002, 0.5, 0.50084628328220628, 0.49971790538453521},
        {4, 5'000'000, 1e-6, 0.73497422507659958, 0.44049319733147931},
        {15, 5'000'000, 1e-6, 0.00022625155336996888, 0.99993099254436832},
        {10100, 10'000'000, 0.001, 0.15974246645121225, 0.84266922001083967},
        {1'999'000, 2'000'000, 0.9995, 0.5084093674328315, 0.50420839875157696},
    };
    for (const Case& c : cases) {
        CAPTURE(c.k);
        CAPTURE(c.n);
        CAPTURE(c.p);
        CHECK(binomial_upper_tail(c.k, c.n, c.p) ==
              doctest::Approx(c.upper).epsilon(1e-9).scale(0));
        CHECK(binomial_lower_tail(c.k, c.n, c.p) ==
              doctest::Approx(c.lower).epsilon(1e-9).scale(0));
    }
}

TEST_CASE("Wilson's interval: inside [0, 1], around the share, narrowing with n") {
    const auto [lo, hi] = wilson_interval(120, 1000);
    CHECK(lo < 0.12);
    CHECK(hi > 0.12);
    CHECK(lo == doctest::Approx(0.1014).epsilon(0.002));  // the textbook value for 120/1000
    CHECK(hi == doctest::Approx(0.1418).epsilon(0.002));
    const auto zero = wilson_interval(0, 50);
    CHECK(zero.first == 0.0);
    CHECK(zero.second > 0.0);
    const auto wide = wilson_interval(12, 100), narrow = wilson_interval(1200, 10000);
    CHECK(wide.second - wide.first > narrow.second - narrow.first);
    CHECK(wilson_interval(0, 0) == std::pair<double, double>{0.0, 1.0});
}

TEST_CASE("the rate-ratio test: same rates are not significant, a tripled rate is") {
    // 1000 vs 1030 samples over equal work: noise.
    CHECK(rate_ratio_two_sided(1000, 1e5, 1030, 1e5) > 0.3);
    // Twice the work on b's side with twice the samples: the same rate.
    CHECK(rate_ratio_two_sided(1000, 1e5, 2000, 2e5) > 0.9);
    // Three times the samples for the same work.
    CHECK(rate_ratio_two_sided(1000, 1e5, 3000, 1e5) < 1e-12);
    // "More than 5 % up beyond sampling error": not for +3 % on 1000 samples, yes for +200 %.
    CHECK(rate_ratio_above(1000, 1e5, 1030, 1e5, 1.05) > 0.5);
    CHECK(rate_ratio_above(1000, 1e5, 3000, 1e5, 1.05) < 1e-12);
    CHECK(rate_ratio_below(1000, 1e5, 300, 1e5, 0.95) < 1e-12);
    CHECK(rate_ratio_two_sided(0, 1e5, 0, 1e5) == 1.0);
}

}  // namespace
}  // namespace rackprof::gmon
