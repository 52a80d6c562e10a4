#!/usr/bin/env bash
# Packs a patch's trial for one device call (tools/cuda/trial_on_device.sh runs it): the patch
# applied to HEAD in a scratch worktree, built with the tests and the timeline library into
# .gpu/NAME.tar.xz, then HEAD itself, the CLI only, into .gpu/main.tar.xz, both from one build
# directory so that the second build recompiles only the files the patch touched (~4 + ~2 min here;
# ~13 min in all on a fresh checkout, where the first build is a whole one: stop 86).
# Experiments kept as patches (docs/notes/patches/) outlive the checkouts their branches die with;
# this makes a bundle pair from one in a single command. Usage:
#   tools/cuda/pack_trial.sh PATCH NAME [BUILD_DIR=/work/build-trial]
# NAME: letters, digits, '_' and '-' (it names the bundle and the A/B's build), not "main".
# The worktree is always /tmp/bifocal-trial, so that BUILD_DIR (CMake ties a build directory to
# its source path) serves every later trial. GPU_DIR (default .gpu, under the repo's root) is where
# the bundles go, and where trial_on_device.sh reads them.
set -euo pipefail
cd "$(dirname "$0")/../.."
patch=${1:?usage: tools/cuda/pack_trial.sh PATCH NAME [BUILD_DIR]}
name=${2:?usage: tools/cuda/pack_trial.sh PATCH NAME [BUILD_DIR]}
build=${3:-/work/build-trial}
source tools/cuda/trial_name.sh
refuse_bad_trial_name pack_trial "$name"
[ -f "$patch" ] || { echo "pack_trial: no patch file '$patch'" >&2; exit 2; }
root=$(pwd)
patch=$(realpath "$patch")
gpu_dir=$root/${GPU_DIR:-.gpu}
worktree=/tmp/bifocal-trial
head=$(git rev-parse --short HEAD)  # read once: the checkout may move while this builds
# The worktree is kept between trials and moved to HEAD in place: checkout rewrites only the files
# that differ, so the others keep their times and the build recompiles only what changed (a fresh
# worktree gave every file a new time, and every trial a full rebuild, ~7-10 min here).
if git -C "$worktree" rev-parse --git-dir >/dev/null 2>&1 \
    && [ "$(git -C "$worktree" rev-parse --git-common-dir)" -ef "$(git rev-parse --git-common-dir)" ]; then
  git -C "$worktree" checkout -q --force --detach "$head"
  git -C "$worktree" clean -q -fd  # a patch's added files, left by a trial cut short
else
  rm -rf "$worktree"
  git worktree prune
  git worktree add -q --detach "$worktree" "$head"
fi
if ! git -C "$worktree" apply --check "$patch" 2>/dev/null; then
  echo "pack_trial: $patch does not apply on HEAD ($head)" >&2
  exit 1
fi
git -C "$worktree" apply "$patch"
# The bundles name the worktree as their source tree, the path their tests look for golden files
# under: on the GPU machine run_on_device.sh links it to the repo's copy there, whose golden files
# are the worktree's unless the patch changes them.
CONTENTS="bifocal bifocal_cuda_tests timeline" \
  bash "$worktree/tools/cuda/pack_for_device.sh" "$build" "$gpu_dir/$name.tar.xz"
git -C "$worktree" apply -R "$patch"  # HEAD again (added files gone too): only those files rebuild
CONTENTS="bifocal" bash "$worktree/tools/cuda/pack_for_device.sh" "$build" "$gpu_dir/main.tar.xz"
echo "pack_trial: $gpu_dir/$name.tar.xz (HEAD + $(basename "$patch"))," \
  "$gpu_dir/main.tar.xz (HEAD, $head)"
echo "next: run(command=\"GPU_DIR=${GPU_DIR:-.gpu} bash tools/cuda/trial_on_device.sh $name\"," \
  "carry=[\"${GPU_DIR:-.gpu}\"])"
