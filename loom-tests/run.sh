#!/usr/bin/env bash
# Runs every loom model (loom-tests/tests/*.rs) in its own target directory, so the global
# `--cfg loom` never touches the normal build's artifacts.
#
# Env: LOOM_MAX_PREEMPTIONS (default 3: the suite takes well under a minute of model checking
# on 2 cores; 2 is quicker, 4 takes a few minutes), CARGO_TARGET_DIR (default target-loom).
# Extra arguments go to `cargo test` (e.g. `--test binder_cas`).
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg loom"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target-loom}"
# Models need optimised code, not the release profile's LTO and debug info (slow to link).
export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_DEBUG=0
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
exec cargo test -p magma-loom-tests --release "$@"
