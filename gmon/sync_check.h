// The synchronisation alarm. A sampling period that divides the program's own period (a main
// loop paced by the same clock) samples the same few PCs again and again: the histogram is
// then a picture of the phase, not of the time. The target can dither its sampling period
// (target-fw: RACKPROF_SAMPLE_DITHER); a run sampled at a fixed period and one sampled with
// dither then give shares that differ far beyond sampling error, function by function, which a
// fair (unsynchronised) program never does. This compares the two.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmon/profile.h"

namespace rackprof::gmon {

struct SyncFunction {
    std::string name;
    std::uint64_t fixed_samples = 0;     // self samples under the fixed period
    std::uint64_t dithered_samples = 0;  // under the dithered period
    double fixed_percent = 0, dithered_percent = 0;
    std::pair<double, double> fixed_interval, dithered_interval;  // 95 % Wilson, in percent
    double p_value = 1.0;  // exact conditional binomial test of the two shares, two-sided
    bool flagged = false;  // beyond sampling error after Bonferroni
};

struct SyncCheck {
    std::uint64_t fixed_samples = 0, dithered_samples = 0;
    std::size_t compared = 0;  // functions with samples on either side (the Bonferroni count)
    double alpha = 0.01;       // family-wise
    std::vector<SyncFunction> functions;  // flagged first, then by the change of share
    bool synchronised() const;
    std::size_t flagged() const;
};

// `fixed`: a profile sampled at a fixed period; `dithered`: the same program sampled with a
// dithered period (the comparison is symmetric, the names only label the sides). Functions are
// matched by name. Throws std::invalid_argument when either side has no samples.
SyncCheck check_sync(const Profile& fixed, const Profile& dithered, double alpha = 0.01);

// The check as JSON (schema rackprof.sync-check/1): {"synchronised", "warning" (null or a
// sentence), "test", "fixed", "dithered", "functions": [...]}.
nlohmann::json sync_check_json(const SyncCheck& check);
// The warning sentence, empty when nothing is flagged.
std::string sync_warning(const SyncCheck& check);
std::string render_sync_check_text(const SyncCheck& check, const std::string& fixed,
                                   const std::string& dithered);

}  // namespace rackprof::gmon
