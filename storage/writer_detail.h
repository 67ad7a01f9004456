// What the storage writer's files share (storage_writer.cc, writer_failures.cc,
// writer_retention.cc). Internal to storage/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "storage/storage_writer.h"

namespace rackprof::storage::detail {

std::int64_t now_ns();
// "1.5 MiB".
std::string human_bytes(std::uint64_t bytes);
// "1.2 MiB free of 2.0 MiB" for the file system holding the database.
std::string free_space(const std::filesystem::path& database);
// The session an operation belongs to (0: none, e.g. a board).
SessionId session_of(const WriteOp& op);
// A held operation the new one replaces: the newest HELLO, board or firmware change wins.
bool replaces(const WriteOp& held, const WriteOp& op);

// Seals a session in the transaction that closes it, under a savepoint: a seal that fails
// costs nothing but the seal (the rows answer, and the next start's background step seals it).
void seal_at_close(SessionStore& store, SessionId session);

}  // namespace rackprof::storage::detail
