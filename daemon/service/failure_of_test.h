// For the service's unit tests: the Failure a call refuses with.
#pragma once

#include <doctest/doctest.h>

#include <functional>

#include "daemon/service/rack_service.h"

namespace rackprof::daemon::service {

// The failure `f` throws as a ServiceError; fails the test when it throws none.
inline Failure failure_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ServiceError& e) {
        return e.failure();
    }
    FAIL("no ServiceError");
    return Failure::kBadRequest;
}

}  // namespace rackprof::daemon::service
