#include "storage/schema.h"

#include <doctest/doctest.h>

#include <string>

#include "storage/counters.h"

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

TEST_CASE("every counter of the counters' table is a column of sessions, 0 by default") {
    Database db(":memory:");
    migrate_schema(db);
    for (const auto& counter : kSessionCounters) {
        CAPTURE(counter.name);
        Statement column = db.prepare(
            "SELECT type, \"notnull\", dflt_value FROM pragma_table_info('sessions') "
            "WHERE name = ?");
        column.bind(1, counter.name);
        REQUIRE(column.step());
        CHECK(column.column_text(0) == "INTEGER");
        CHECK(column.column_int(1) == 1);
        CHECK(column.column_text(2) == "0");
    }
}

TEST_CASE("a database from a newer rackprof is refused and left as it is") {
    Database db(":memory:");
    db.exec("PRAGMA user_version = 99");
    CHECK_THROWS_WITH_AS(migrate_schema(db), doctest::Contains("newer"), StorageError);
    CHECK(schema_version(db) == 99);
}

}  // namespace
}  // namespace rackprof::storage
