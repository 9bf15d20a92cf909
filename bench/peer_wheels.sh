#!/usr/bin/env bash
# Sourced by the device scripts that run fast-plaid (compress_gpu.sh, index_gpu.sh): install the
# carried wheels ("${WHL:-.whlc}": fast-plaid 1.7.0.2110, fastkmeans 0.5.0, joblib, and
# xtr-warp-rs 2.1.0.2110; here `pip download --no-deps` with the device platform flags) into
# /tmp/site. fast-plaid imports usearch, and xtr-warp-rs duckdb and pyarrow (metadata filtering
# and index updates, which these runs do not use) at import time: stubs that refuse to be used
# stand in for them where the machine lacks them.
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "${WHL:-.whlc}"/*.whl || exit 1
mkdir -p /tmp/site/usearch
echo 'class Index:  # noqa: D101 - stub
    def __init__(self, *a, **k):
        raise RuntimeError("usearch stub: not installed on this machine")' > /tmp/site/usearch/index.py
touch /tmp/site/usearch/__init__.py
for m in duckdb pyarrow; do
  python3 -c "import $m" >/dev/null 2>&1 && continue
  mkdir -p /tmp/site/$m
  echo "def __getattr__(name):  # stub: metadata filtering is not used here
    raise AttributeError(f'$m stub (not installed on this machine): no {name}')" > /tmp/site/$m/__init__.py
done
