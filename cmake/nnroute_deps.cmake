# nnroute_deps.cmake - finds the libraries and tools every nnroute build needs.
#
# One file, included by the top-level CMakeLists.txt and by scripts/depcheck/ (the probe
# scripts/bootstrap.sh runs after installing packages), so the bootstrap's check and the
# real configure step can never disagree about what "installed" means.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PROTOBUFC REQUIRED IMPORTED_TARGET libprotobuf-c)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
pkg_check_modules(CRYPTO REQUIRED IMPORTED_TARGET libcrypto)
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
# oneDNN's package config calls find_package(OpenCL) itself (Debian builds it with the
# OpenCL runtime), so ocl-icd-opencl-dev is a build dependency although nnroute uses
# only oneDNN's CPU engine.
find_package(dnnl CONFIG REQUIRED)
find_program(PROTOC_C NAMES protoc-c REQUIRED)
find_package(Threads REQUIRED)
