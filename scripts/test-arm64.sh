#!/usr/bin/env bash
# The engine's arm64 code on an x86-64 Linux machine: the search tests (the semantic tier's
# NEON product kernel and GELU, the tiny-BERT forward pass, fusion, the lexical index) built for
# aarch64-unknown-linux-gnu and run under qemu-user. arm64 macOS and Linux users get the NEON
# path, which no x86-64 test reaches.
#
#   scripts/test-arm64.sh            # installs qemu-user and the cross linker from Debian if missing
#
# Only `search::`: that is where the code differs by architecture (pulp's runtime dispatch).
# The rest of the library spawns processes, and qemu-user's emulated fork/exec does not report
# a failed `chdir` in the child the way Linux does, so process tests would test qemu.
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu

if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
  packages=(qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
  echo "installing ${packages[*]} (Debian) for the arm64 tests" >&2
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  apt_install() { DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${packages[@]}" >&2; }
  # Stale package lists name versions the mirror no longer has: refresh them once and retry.
  if ! apt_install && ! { "${sudo[@]}" apt-get update -q >&2 && apt_install; }; then
    echo "error: could not install ${packages[*]}; install them (Debian/Ubuntu: apt-get install ${packages[*]}) and rerun" >&2
    exit 1
  fi
fi
if ! rustup target list --installed | grep -qx "$target"; then
  rustup target add "$target" || {
    echo "error: the Rust standard library for $target is missing; rustup target add $target" >&2
    exit 1
  }
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot"
cargo test --lib --target "$target" search::
