#!/usr/bin/env bash
# Installs bifocal's build dependencies from Debian 12's packages (DESIGN.md "Dependencies"); bzip2
# decompresses the HellaSwag data as published (.bz2) for `bifocal eval`; xz-utils packs and unpacks
# the GPU machine's bundles (tools/cuda, whose tests run in CI).
set -euo pipefail
packages=(build-essential cmake pkg-config git bzip2 xz-utils libopenblas-dev libpcre2-dev libutf8proc-dev
          nlohmann-json3-dev libfmt-dev libcli11-dev libgtest-dev googletest)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
