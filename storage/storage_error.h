// What every storage failure throws: SQLite's errors, a database from a newer rackprof, a
// corrupt record blob.
#pragma once

#include <stdexcept>

namespace rackprof::storage {

class StorageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace rackprof::storage
