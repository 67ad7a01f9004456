# The firmware's transmit ring (runtime/ring.h) built for the host and unit-tested there with
# nested producers (runtime/ring_host_test.cc): QEMU only shows the interleavings its timers
# happen to hit. Included by the top-level CMakeLists.txt.
if(RACKPROF_TESTS)
  enable_language(C)
  # The ring as the firmware compiles it: C, with the C half of the project's warnings
  # (rackprof_warnings also holds C++-only flags, which the C compiler refuses under -Werror).
  add_library(rackprof_fw_ring_host STATIC ${CMAKE_CURRENT_LIST_DIR}/runtime/ring.c
              ${CMAKE_CURRENT_LIST_DIR}/runtime/ring_host.c)
  set_target_properties(rackprof_fw_ring_host PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON
                        C_EXTENSIONS OFF)
  target_compile_definitions(rackprof_fw_ring_host PUBLIC RACKPROF_HOST_TEST)
  target_compile_options(rackprof_fw_ring_host PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                         $<$<BOOL:${RACKPROF_WERROR}>:-Werror>)

  add_executable(firmware_ring_tests ${CMAKE_CURRENT_LIST_DIR}/runtime/ring_host_test.cc)
  target_link_libraries(firmware_ring_tests PRIVATE rackprof_fw_ring_host rackprof_warnings
                        rackprof_doctest_main)
  rackprof_unit_test(firmware_ring_tests)
endif()
