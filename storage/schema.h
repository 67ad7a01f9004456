// The database schema: its DDL as forward migrations, one per version, and the version a
// database is at (PRAGMA user_version). Old migrations never change; a new column or table is a
// new migration and kSchemaVersion + 1.
#pragma once

#include "storage/sqlite.h"

namespace rackprof::storage {

inline constexpr int kSchemaVersion = 18;
// The version that added session_cct (the calling-context tree).
inline constexpr int kCallingContextSchema = 10;
// The version that added record_slices and sessions.summed_seq.
inline constexpr int kRecordSlicesSchema = 11;
// The version that added sessions.raw_pruned_ns / raw_pruned_keep_days (retention).
inline constexpr int kRetentionSchema = 12;
// The version that added session_sums (a finished session's aggregate as one block).
inline constexpr int kSessionSumsSchema = 15;
// Probe links' counters (samples_halted_ns, stack_unwind_failures) and sessions.cct_unit.
inline constexpr int kProbeCountersSchema = 16;
inline constexpr int kArchSchema = 17;   // sessions.arch
inline constexpr int kTasksSchema = 18;  // session_tasks

// The database's PRAGMA user_version: 0 for a new file.
int schema_version(Database& db);

// Creates the schema in a new database or migrates an older one forward, one transaction per
// version. Throws StorageError for a database from a newer rackprof.
void migrate_schema(Database& db);

}  // namespace rackprof::storage
