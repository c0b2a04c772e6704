#!/bin/sh
# RUSTC_WRAPPER for run-mutations.sh: compiles magma-engine with
# `--cfg magma_mutation="$MAGMA_MUTATION"` and every other crate unchanged. Equivalent to adding
# the cfg to RUSTFLAGS, without rebuilding loom and the other dependencies for each mutation.
rustc="$1"
shift
case " $* " in
*" --crate-name magma_engine "*)
    if [ -n "${MAGMA_MUTATION:-}" ]; then
        exec "$rustc" "$@" --cfg "magma_mutation=\"$MAGMA_MUTATION\""
    fi
    ;;
esac
exec "$rustc" "$@"
