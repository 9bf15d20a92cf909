#!/usr/bin/env python3
# Usage: python3 bench/finite_corpus.py OUT.safetensors  (no numpy needed; writes 1.07 GB)
# A 1 GB corpus file: f16, d = 128, 4M tokens, documents of 32..255 tokens (seeded).
import json, random, struct, sys
out = sys.argv[1]
d, T = 128, 4 * 1024 * 1024
rng = random.Random(7)
lens = []
total = 0
while total < T:
    n = min(rng.randint(32, 255), T - total)
    lens.append(n); total += n
offsets = [0]
for n in lens: offsets.append(offsets[-1] + n)
block_vals = [rng.uniform(-1, 1) for _ in range(1 << 19)]  # 1 MiB of f16
block = struct.pack('<%de' % len(block_vals), *block_vals)
emb_bytes = T * d * 2
off_bytes = len(offsets) * 8
header = {
    "__metadata__": {"format": "tilemaxsim.corpus", "version": "1"},
    "embeddings": {"dtype": "F16", "shape": [T, d], "data_offsets": [0, emb_bytes]},
    "offsets": {"dtype": "I64", "shape": [len(offsets)], "data_offsets": [emb_bytes, emb_bytes + off_bytes]},
}
h = json.dumps(header).encode()
h += b' ' * (-len(h) % 8)
with open(out, 'wb') as f:
    f.write(struct.pack('<Q', len(h))); f.write(h)
    for i in range(emb_bytes // len(block)):
        f.write(block)
    f.write(struct.pack('<%dq' % len(offsets), *offsets))
print(len(lens), "documents,", T, "tokens")
