#!/usr/bin/env bash
# Sourced by the device scripts that run fast-plaid (compress_gpu.sh, index_gpu.sh): install the
# carried wheels ("${WHL:-.whlc}": fast-plaid 1.7.0.2110, fastkmeans 0.5.0, joblib; here
# `pip download --no-deps` with the device platform flags) into /tmp/site. fast-plaid imports
# usearch (metadata filtering and index updates, which these runs do not use) at import time: a
# stub that refuses to be used stands in for it.
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "${WHL:-.whlc}"/*.whl || exit 1
mkdir -p /tmp/site/usearch
echo 'class Index:  # noqa: D101 - stub
    def __init__(self, *a, **k):
        raise RuntimeError("usearch stub: not installed on this machine")' > /tmp/site/usearch/index.py
touch /tmp/site/usearch/__init__.py
