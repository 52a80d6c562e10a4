#!/usr/bin/env bash
# The whole CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer, in build-sanitize/.
# Any out-of-bounds access, use after free, leak, mismatched new/delete or undefined behaviour
# (null to memcpy, signed overflow, misaligned load) stops the test that did it and fails it.
# Not part of CI (the build and run take ~25 min on two cores); run it after changing C++ that
# handles memory. Extra arguments go to ctest (e.g. -R Safetensors).
set -euo pipefail
cd "$(dirname "$0")/.."
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-sanitize -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-sanitize --output-on-failure -j"$(nproc)" "$@"
