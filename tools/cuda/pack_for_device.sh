#!/usr/bin/env bash
# Builds the CUDA configuration here (nvcc 13, no GPU needed) and packs what the GPU machine lacks
# into .gpu/bundle.tar.xz: the CLI, the CPU and the CUDA test binaries, and their build directory
# (~8 MB). The Debian shared libraries they link (the GPU machine has CUDA and cuBLAS but none of
# OpenBLAS, PCRE2, utf8proc, fmt) go once into .gpu/libs.tar.xz (~5.5 MB), shared by every bundle.
# The device side is tools/cuda/run_on_device.sh. Usage:
# tools/cuda/pack_for_device.sh [BUILD_DIR=/work/build-cuda] [BUNDLE=.gpu/bundle.tar.xz] — a
# second bundle (another branch's build) lets one device call run both. A call carries the working
# tree (~43 MiB at stop 73, and growing) and its carry paths within 64 MiB: ~20 MiB of carry is
# now too much (stop 73's was refused), so carry only the bundles the call runs. With
# CONTENTS (default "bifocal bifocal_tests bifocal_cuda_tests timeline") a bundle holds only what
# its call runs, e.g. CONTENTS=bifocal for an A/B build (~2.2 MB) or "bifocal bifocal_cuda_tests"
# (~4.6 MB); `timeline` is the CUPTI library kernel_timeline.sh injects, and the CUPTI it links.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-/work/build-cuda}
bundle=${2:-.gpu/bundle.tar.xz}
contents=${CONTENTS:-bifocal bifocal_tests bifocal_cuda_tests timeline}
for item in $contents; do  # before the build, which takes minutes
  case $item in
    bifocal|bifocal_tests|bifocal_cuda_tests|timeline) ;;
    *) echo "pack_for_device: CONTENTS names bifocal, bifocal_tests, bifocal_cuda_tests or timeline, not '$item'" >&2
       exit 2 ;;
  esac
done
# The CUDA tests run the CLI too (CudaModel.BenchMeasures…, CudaModelErrors: $BUILD/bifocal): without it
# in the bundle they fail with exit 127 (stop 84's main-tests bundle), not for anything in the code.
if [[ " $contents " == *" bifocal_cuda_tests "* && " $contents " != *" bifocal "* ]]; then
  echo "pack_for_device: warning: CONTENTS has bifocal_cuda_tests without bifocal: the tests that run the CLI" \
    "will fail with exit 127 on the device" >&2
fi
cmake -S . -B "$build" -DBIFOCAL_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)"
stage=$(mktemp -d)
mkdir -p "$stage/bin"
for item in $contents; do
  if [ "$item" != timeline ]; then
    cp "$build/$item" "$stage/bin/"
  elif [ -e "$build/libbifocal_timeline.so" ]; then  # the CUPTI timeline library and the CUPTI it links
    cp "$build/libbifocal_timeline.so" "$stage/bin/"
    cp -L "$(ldd "$build/libbifocal_timeline.so" | awk '/libcupti/ {print $3}')" "$stage/bin/"
  fi
done
echo "$build" > "$stage/build_dir"
# The tests look for golden files under the tree CMake configured the build from (a path compiled
# into them), and run_on_device.sh links that path to its copy of the repo. It is this tree: cmake
# above refuses a build directory configured from another.
pwd > "$stage/source_dir"
mkdir -p "$(dirname "$bundle")"
tar -C "$stage" -cJf "$bundle" bin build_dir source_dir
libs="$(dirname "$bundle")/libs.tar.xz"
if [ ! -e "$libs" ]; then
  mkdir -p "$stage/lib"
  for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libfmt.so.9 libpcre2-8.so.0 libutf8proc.so.2; do
    cp -L "/lib/x86_64-linux-gnu/$lib" "$stage/lib/"
  done
  tar -C "$stage" -cJf "$libs" lib
fi
rm -rf "$stage"
ls -la "$bundle" "$libs"
