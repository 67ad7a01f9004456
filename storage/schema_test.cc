#include "storage/schema.h"

#include <doctest/doctest.h>

#include <string>

namespace rackprof::storage {
namespace {

TEST_CASE("a new database gets every migration, and migrating again changes nothing") {
    Database db(":memory:");
    CHECK(schema_version(db) == 0);
    migrate_schema(db);
    CHECK(schema_version(db) == kSchemaVersion);
    migrate_schema(db);
    CHECK(schema_version(db) == kSchemaVersion);
}

TEST_CASE("a database from a newer rackprof is refused and left as it is") {
    Database db(":memory:");
    db.exec("PRAGMA user_version = 99");
    CHECK_THROWS_WITH_AS(migrate_schema(db), doctest::Contains("newer"), StorageError);
    CHECK(schema_version(db) == 99);
}

}  // namespace
}  // namespace rackprof::storage
