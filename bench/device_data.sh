#!/usr/bin/env bash
# On the device: unpack what bench/device_build.sh packed to fit the carry limit (the Cranfield
# corpus travels xz-compressed). Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in .dev/cranfield/*.xz; do
  [ -e "$f" ] || continue
  [ -e "${f%.xz}" ] && continue
  if command -v xz >/dev/null; then xz -dk "$f"; else python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$f" "${f%.xz}"; fi
done
