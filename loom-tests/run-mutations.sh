#!/usr/bin/env bash
# Proves each loom model can fail: runs the model meant to catch each deliberate bug
# (`engine/src/mutation.rs`, switched on by MAGMA_MUTATION in a loom build) and asserts that it
# fails with the expected violation, and that the same model passes without the mutation.
# One loom build serves every mutation (the same target directory as run.sh).
#
# Usage: loom-tests/run-mutations.sh [mutation...]   (default: all)
# Env: LOOM_MAX_PREEMPTIONS (default 2), CARGO_TARGET_DIR (default target-loom).
set -euo pipefail
cd "$(dirname "$0")/.."

# mutation|model (test file)|what the failure must say (extended regex)
MUTATIONS=(
    "version_before_contents|snapshot_claims|but not all"
    "split_claim|binder_cas|two winners"
    "skip_external_bump|binder_cas|claimed after the cache applied it"
    "no_generation_check|queue_handoff|deleted entry"
    "forget_leaks|assume_forget|freed by forgetting"
    "drain_without_unpop|shutdown|InFlight"
    "epoch_after_load|worker_epochs|still holds snapshot|reclaimed everything below"
    "publish_seq_first|worker_epochs|still holds snapshot|reclaimed everything below"
    "shard_release_ignores_workers|sharding_worker_sync|succeeded after x was released|is not applied yet"
    "shard_release_ignores_claims|sharding_worker_sync|is not applied yet"
    "shard_release_ignores_binds|sharding_worker_sync|is still binding to it"
    "lane_skips_validation|cross_node_claims|both p and q placed"
    "epoch_after_validation|cross_node_claims|both p and q placed"
    "claim_ignores_epoch|cross_node_claims|both p and q placed"
    "static_pv_outside_lane|pv_reservation|given to two pods"
    "nomination_without_bump|nominated_room|claimed after the cache applied it"
    "dra_trust_worker|device_claims|given to two pods"
)

export RUSTFLAGS="--cfg loom"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target-loom}"
# As run.sh: models need optimised code, not LTO (so both scripts share one build).
export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_DEBUG=0
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16

wanted=("$@")
selected() {
    [ ${#wanted[@]} -eq 0 ] && return 0
    local w
    for w in "${wanted[@]}"; do [ "$w" = "$1" ] && return 0; done
    return 1
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
runs=()
for entry in "${MUTATIONS[@]}"; do
    IFS='|' read -r mutation model expect <<<"$entry"
    selected "$mutation" && runs+=("$entry")
done

cargo test -q -p magma-loom-tests --release --no-run

# Without mutations, every model concerned passes.
export MAGMA_MUTATION=""
for entry in "${runs[@]}"; do
    IFS='|' read -r mutation model expect <<<"$entry"
    if ! cargo test -q -p magma-loom-tests --release --test "$model" >"$log" 2>&1; then
        echo "FAIL  model $model does not pass without mutations:"
        cat "$log"
        exit 1
    fi
done

failed=0
for entry in "${runs[@]}"; do
    IFS='|' read -r mutation model expect <<<"$entry"
    export MAGMA_MUTATION="$mutation"
    if cargo test -p magma-loom-tests --release --test "$model" >"$log" 2>&1; then
        echo "FAIL  $mutation: model $model still passes"
        failed=1
    elif grep -qE -- "$expect" "$log"; then
        echo "ok    $mutation: model $model fails ($(grep -m1 -oE -- "$expect" "$log"))"
    else
        echo "FAIL  $mutation: model $model fails, but not with \"$expect\":"
        grep -E "panicked|error" -A2 "$log" | head -8
        failed=1
    fi
done
exit $failed
