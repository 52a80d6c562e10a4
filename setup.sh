#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install dependencies, build, run the main job.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/install-deps.sh
bash scripts/build.sh
bash scripts/main-job.sh
