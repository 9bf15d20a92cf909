# Sourced by the device scripts: the cubins bench/kernel_cache.sh compiled here (.dev/kcache,
# carried) unpacked into $TILEMAXSIM_CACHE_DIR, where the engine looks them up by key. A
# missing or stale one costs nothing but the compile it would have saved.
if [ -n "${TILEMAXSIM_CACHE_DIR:-}" ] && ls .dev/kcache/*.xz >/dev/null 2>&1; then
  mkdir -p "$TILEMAXSIM_CACHE_DIR"
  for f in .dev/kcache/*.xz; do
    xz -dc "$f" > "$TILEMAXSIM_CACHE_DIR/$(basename "${f%.xz}")"
  done
fi
