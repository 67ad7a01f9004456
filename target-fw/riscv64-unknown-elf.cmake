# CMake toolchain file for Debian's gcc-riscv64-unknown-elf (bare-metal RISC-V, no OS, no libc;
# rv32 through -march/-mabi, which target-fw/riscv/CMakeLists.txt sets per board).
#   cmake -S target-fw/riscv -B build-fw-riscv -G Ninja --toolchain $PWD/target-fw/riscv64-unknown-elf.cmake
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR riscv)

find_program(RACKPROF_RISCV_GCC riscv64-unknown-elf-gcc REQUIRED)
set(CMAKE_C_COMPILER ${RACKPROF_RISCV_GCC})
set(CMAKE_ASM_COMPILER ${RACKPROF_RISCV_GCC})
# The compiler checks would try to link a hosted program; a static library needs no startup code.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
