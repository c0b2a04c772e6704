#!/usr/bin/env bash
# Regenerate every table of BENCHMARKS.md.
#
#   perf/bench.sh                 # all measurements (about 15 minutes on 2 cores)
#   perf/bench.sh burst sweep     # only some of them (names below)
#
# Builds magma-perf in release mode, runs each measurement with --json into $OUT (default
# perf/results), draws the plots into perf/plots, and prints Markdown (machine, then one section
# per measurement with the exact command, the load average before it, and its table) to stdout
# and to $OUT/tables.md ($OUT/tables-NAME-....md for a partial run). Paste the sections into
# BENCHMARKS.md.
#
# Environment: OUT (results directory), CARGO_TARGET_DIR (default target-perf), BIN (skip the
# build and use this binary).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-perf/results}"
PLOTS="${PLOTS:-perf/plots}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-perf}"
mkdir -p "$OUT" "$PLOTS"

if [[ -z "${BIN:-}" ]]; then
    cargo build --release -p magma-perf >&2
    BIN="$CARGO_TARGET_DIR/release/magma-perf"
fi

ALL=(burst burst50k steady churn nearfull fragmented mixed conflicts memory sweep micro)
WANT=("$@")
[[ ${#WANT[@]} -eq 0 ]] && WANT=("${ALL[@]}")
want() { local w; for w in "${WANT[@]}"; do [[ "$w" == "$1" ]] && return 0; done; return 1; }

# A partial run writes its own file, so the full set of tables is not overwritten.
if [[ $# -eq 0 ]]; then TABLES="$OUT/tables.md"; else TABLES="$OUT/tables-$(IFS=-; echo "$*").md"; fi
: > "$TABLES"
emit() { printf '%s\n' "$*" | tee -a "$TABLES"; }

load() { cut -d' ' -f1-3 /proc/loadavg; }

# run NAME ARGS...: one measurement into $OUT/NAME.json, its command and table printed.
run() {
    local name="$1"; shift
    local before; before="$(load)"
    emit ""
    emit "#### $name"
    emit ""
    emit '```'
    emit "magma-perf $* --json $OUT/$name.json"
    emit '```'
    emit ""
    local status=""
    "$BIN" "$@" --quiet --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1 \
        || status=" **The run failed: $(tail -n1 "$OUT/$name.txt")**"
    emit "Load average before: $before; after: $(load).$status"
    emit ""
    "$BIN" table "$OUT/$name.json" | tee -a "$TABLES"
}

emit "### Machine"
emit ""
emit "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs available"
emit "- Memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
emit "- Kernel: $(uname -r); $(rustc --version)"
emit "- Commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
emit "- Date: $(date -u +%Y-%m-%dT%H:%MZ)"

if want burst; then
    run burst-5k-w1 burst --nodes 5000 --pods 200000 --workers 1
    run burst-5k-w2 burst --nodes 5000 --pods 200000 --workers 2
fi
if want burst50k; then
    run burst-50k-w2 burst --nodes 50000 --pods 200000 --workers 2 --baseline-pods 200
fi
if want steady; then
    run steady-10k-per-s steady --nodes 5000 --pods 100000 --rate 10000 --workers 2
fi
if want churn; then
    run churn-60s churn --nodes 5000 --pods 300000 --rate 5000 --lifetime 5 --workers 2
fi
if want nearfull; then
    run near-full near-full --workers 2
fi
if want fragmented; then
    run fragmented fragmented --workers 2
fi
if want mixed; then
    run mixed mixed --workers 2
fi
if want conflicts; then
    # DESIGN.md §6: full requeues <= 0.1% at 4 workers / 50% full, <= 1% at 8 workers / 80% full.
    run conflicts-w4-fill50 burst --nodes 5000 --pods 100000 --fill 0.5 --workers 4 --no-baseline
    run conflicts-w8-fill80 burst --nodes 5000 --pods 100000 --fill 0.8 --workers 8 --no-baseline
fi
if want memory; then
    run memory-10k-150k burst --nodes 10000 --pods 150000 --workers 2 --no-baseline
    run memory-50k-1m burst --nodes 50000 --pods 1000000 --workers 2 --no-baseline
fi
if want sweep; then
    before="$(load)"
    emit ""
    emit "#### sweep"
    emit ""
    emit '```'
    emit "magma-perf sweep burst --nodes 5000 --pods 100000 --workers 1,2,4,8 --candidates 1,3,5 --json $OUT/sweep.json"
    emit '```'
    emit ""
    status=""
    "$BIN" sweep burst --nodes 5000 --pods 100000 --workers 1,2,4,8 --candidates 1,3,5 \
        --quiet --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1 \
        || status=" **The sweep failed: $(tail -n1 "$OUT/sweep.txt")**"
    emit "Load average before: $before; after: $(load).$status"
    emit ""
    "$BIN" table --sweep "$OUT/sweep.json" | tee -a "$TABLES"
fi

if want micro; then
    before="$(load)"
    emit ""
    emit "#### micro-benchmarks"
    emit ""
    emit '```'
    emit "cargo bench -p magma-perf --bench hot -- --warm-up-time 1 --measurement-time 3 --noplot"
    emit '```'
    emit ""
    cargo bench -p magma-perf --bench hot -- --warm-up-time 1 --measurement-time 3 --noplot \
        > "$OUT/micro.txt" 2>&1
    emit "Load average before: $before; after: $(load)."
    emit ""
    # criterion prints "name" then "time: [low median high]" (same or next line).
    awk 'BEGIN { print "| benchmark | median | 95% interval |"; print "|---|--:|---|" }
         /time:/ { line = $0; sub(/.*time: *\[/, "", line); sub(/\].*/, "", line);
                   split(line, v, " ");
                   n = ($1 != "time:") ? $1 : name;
                   printf "| %s | %s %s | %s %s – %s %s |\n", n, v[3], v[4], v[1], v[2], v[5], v[6]; next }
         /^[a-z]/ { name = $1 }' "$OUT/micro.txt" | tee -a "$TABLES"
fi

# Plots from whatever results exist.
latency=()
for f in burst-5k-w2 steady-10k-per-s churn-60s; do
    [[ -f "$OUT/$f.json" ]] && latency+=("$OUT/$f.json")
done
plot=()
[[ -f "$OUT/sweep.json" ]] && plot+=(--sweep "$OUT/sweep.json")
[[ ${#latency[@]} -gt 0 ]] && plot+=(--latency "${latency[@]}")
if [[ ${#plot[@]} -gt 0 ]]; then
    "$BIN" plot "${plot[@]}" --out-dir "$PLOTS" >&2
fi
echo "tables written to $TABLES" >&2
