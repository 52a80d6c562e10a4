#!/usr/bin/env bash
# On the GPU machine (device tool, `carry: [".gpu"]`): unpacks .gpu/bundle.tar.xz from
# pack_for_device.sh, and the shared libraries beside it (libs.tar.xz, unless the bundle holds its
# own lib/), so that the binaries find their absolute paths (the build directory and the source
# tree as they were here), then runs the command given, e.g.
#   bash tools/cuda/run_on_device.sh '$BUILD/bifocal_cuda_tests 2>&1 | tail -5'     (every GPU test)
# BUNDLE=.gpu/other.tar.xz picks another bundle (pack_for_device.sh's second argument); calls with
# different bundles in one device call run one build after the other.
# Under `timeout`, send a long command's output to a file (under $OUT, so that it comes back), not
# through a pipe into `tail`: a timeout kills the pipe before `tail` prints, and the call returns
# nothing. The whole GPU suite takes ~270 s on an H200 (stop 70: 243 s for its first 311 tests), plus the
# bundle's unpacking: give it a limit of 330 s or more.
set -euo pipefail
root=$(pwd)
bundle=${BUNDLE:-.gpu/bundle.tar.xz}
stage=/tmp/bifocal-gpu-$(basename "$bundle" .tar.xz)
rm -rf "$stage" && mkdir -p "$stage" && tar -C "$stage" -xJf "$bundle"
if [ ! -d "$stage/lib" ]; then
  libs="$(dirname "$bundle")/libs.tar.xz"
  [ -f "$libs" ] || { echo "run_on_device: $libs is missing (pack_for_device.sh makes it)" >&2; exit 2; }
  tar -C "$stage" -xJf "$libs"
fi
build=$(cat "$stage/build_dir")
mkdir -p "$(dirname "$build")" /work
# The tests' BIFOCAL_GOLDEN_DIR was compiled as SOURCE/tests/golden: SOURCE is the tree the bundle
# was built from (its source_dir file; /work/main before bundles recorded it), linked to this copy.
source=/work/main
[ -e "$stage/source_dir" ] && source=$(cat "$stage/source_dir")
mkdir -p "$(dirname "$source")"
[ -e "$source" ] || ln -s "$root" "$source"
mkdir -p "$build" && cp "$stage"/bin/* "$build/"
export LD_LIBRARY_PATH="$stage/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export BUILD="$build"
# The command runs without -e and pipefail: a step of it that fails, or a pipe into head, must not
# end the steps after it without a word (its own exit status is the call's).
set +e +o pipefail
eval "$1"
