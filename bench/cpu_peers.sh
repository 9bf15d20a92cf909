#!/usr/bin/env bash
# Benchmark the PyPI CPU MaxSim peers side by side with tilemaxsim; prints markdown tables.
# usage: bash bench/cpu_peers.sh [--bin PATH] [--docs N] [--reps R] [--json PATH] [--no-bin]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv-cpu"
PY="$VENV/bin/python"
PKGS=(maxsim-cpu==0.1.0 fast-maxsim==0.2.0 maxsim-fast==0.1.1 numpy threadpoolctl)

if [[ ! -x "$PY" ]]; then
  echo "creating venv $VENV" >&2
  python3 -m venv "$VENV"
fi
if ! "$PY" - <<'PYEOF' 2>/dev/null
from importlib.metadata import version
want = {"maxsim-cpu": "0.1.0", "fast-maxsim": "0.2.0", "maxsim-fast": "0.1.1"}
assert all(version(k) == v for k, v in want.items())
import numpy, threadpoolctl  # noqa: F401
PYEOF
then
  echo "installing ${PKGS[*]} into $VENV" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check "${PKGS[@]}" >&2
fi

# These slow a current numpy/OpenBLAS on some CPUs; unset them for this benchmark only.
for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do
  if [[ -n "${!v+x}" ]]; then echo "unsetting $v=${!v} for this run" >&2; unset "$v"; fi
done

export CPU_PEERS_CMD="bench/cpu_peers.sh${*:+ $*}"
exec "$PY" "$HERE/cpu_peers.py" "$@"
