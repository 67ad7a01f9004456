# CMake toolchain file for Debian's gcc-arm-none-eabi (bare-metal Cortex-M, no OS, no libc).
#   cmake -S target-fw -B build-fw -G Ninja --toolchain target-fw/arm-none-eabi.cmake
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

find_program(RACKPROF_ARM_GCC arm-none-eabi-gcc REQUIRED)
set(CMAKE_C_COMPILER ${RACKPROF_ARM_GCC})
set(CMAKE_ASM_COMPILER ${RACKPROF_ARM_GCC})
# The compiler checks would try to link a hosted program; a static library needs no startup code.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
