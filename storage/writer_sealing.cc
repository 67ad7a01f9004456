#include "storage/storage_writer.h"
#include "storage/writer_detail.h"

#include <chrono>
#include <cstdio>

// The writer's sealing step: finished sessions whose sums are not sealed yet (written before
// schema v15, or whose seal at close failed) get their session_sums row, a few per step, so
// captures never wait on it. Readers use the rows until then, so nothing is ever wrong, only
// slower.
namespace rackprof::storage {

namespace {

// One session a step (a large one is a second's reading), and the loop does not sleep while
// sessions wait: commits still come every interval between steps.
constexpr int kSessionsPerStep = 1;

}  // namespace

bool StorageWriter::seal_step() {
    if (sealed_ == 0 && seal_below_ == INT64_MAX) sealing_since_ = std::chrono::steady_clock::now();
    try {
        const auto ids = store_.unsealed_sessions(seal_below_, kSessionsPerStep);
        if (ids.empty()) {
            if (sealed_ > 0) {
                const double seconds =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - sealing_since_)
                        .count();
                char line[160];
                std::snprintf(line, sizeof line,
                              "storage: sealed the sums of %llu earlier session(s) in %.1f s",
                              static_cast<unsigned long long>(sealed_), seconds);
                report(StorageEvent::Kind::kSealed, line);
            }
            return false;
        }
        Transaction t(store_.db());
        for (const SessionId id : ids) sealed_ += store_.seal_sums(id) ? 1 : 0;
        t.commit();
        seal_below_ = ids.back();
        return true;
    } catch (const std::exception& e) {  // a StorageError, or memory: never the writer's end
        report(StorageEvent::Kind::kSealFailed,
               std::string("storage: sealing earlier sessions' sums stopped (their rows are read "
                           "instead; tried again at the next start): ") +
                   e.what());
        return false;
    }
}

}  // namespace rackprof::storage

namespace rackprof::storage {

void detail::seal_at_close(SessionStore& store, SessionId session) {
    Database& db = store.db();
    try {
        db.exec("SAVEPOINT seal_at_close");
    } catch (const StorageError&) {
        return;
    }
    try {
        store.seal_sums(session);
        db.exec("RELEASE seal_at_close");
    } catch (const std::exception&) {
        try {
            db.exec("ROLLBACK TO seal_at_close; RELEASE seal_at_close");
        } catch (const StorageError&) {  // the transaction fails on its own, and is retried
        }
    }
}

}  // namespace rackprof::storage
