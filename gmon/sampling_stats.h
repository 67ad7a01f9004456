// The statistics behind every "is this beyond sampling error?" rackprof answers. PC sampling
// makes a function's sample count a binomial draw (each sample lands in it or not), so shares
// get binomial intervals and comparisons get exact binomial tests; nothing assumes normality
// where the counts are small.
#pragma once

#include <cstdint>
#include <utility>

namespace rackprof::gmon {

// k of n as a percentage; 0 when n is 0 (no samples: no share, not NaN).
inline double share_percent(std::uint64_t k, std::uint64_t n) {
    return n ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0.0;
}

// The Wilson score interval of a share `k` of `n` (as fractions), at the normal quantile `z`
// (1.96: 95 %). Chosen over the textbook (Wald) interval because it stays inside [0, 1] and
// keeps its coverage for small counts and for shares near 0, which most functions have.
std::pair<double, double> wilson_interval(std::uint64_t k, std::uint64_t n, double z = 1.96);
// The same for counts that need not be whole: gprof credits a bin's samples to the functions
// it overlaps in proportion to the overlap, so a function may hold 12.5 samples.
std::pair<double, double> wilson_interval_of_credit(double k, double n, double z = 1.96);

// P(X >= k) and P(X <= k) for X ~ Binomial(n, p), from the regularized incomplete beta
// function at any n (Boost.Math's binomial distribution), no normal approximation. NaN for a
// NaN p.
double binomial_upper_tail(std::uint64_t k, std::uint64_t n, double p);
double binomial_lower_tail(std::uint64_t k, std::uint64_t n, double p);
// Two-sided: twice the smaller tail, at most 1.
double binomial_two_sided(std::uint64_t k, std::uint64_t n, double p);

// Two counts over different exposures (samples of a function in two runs, each run's amount
// of work): the exact conditional test of their rates' ratio. Given k_a + k_b events, k_b is
// Binomial(k_a + k_b, r e_b / (e_a + r e_b)) when rate_b = r rate_a. Returns the two-sided
// p-value for r = 1 ...
double rate_ratio_two_sided(std::uint64_t k_a, double e_a, std::uint64_t k_b, double e_b);
// ... and the one-sided p-value of "rate_b / rate_a > r" (small: b's rate exceeds r times a's).
double rate_ratio_above(std::uint64_t k_a, double e_a, std::uint64_t k_b, double e_b, double r);
// ... and of "rate_b / rate_a < r".
double rate_ratio_below(std::uint64_t k_a, double e_a, std::uint64_t k_b, double e_b, double r);

}  // namespace rackprof::gmon
