#!/usr/bin/env bash
# The thread-scaling comparison as one call on a borrowed many-core machine (docs/performance.md, "Scaling with
# threads"): makes the bench models there with `rewind make-model`, runs scripts/bench-scaling.sh against
# llama-bench, and writes the table and a timestamped log to $OUT (table.md, log.txt).
#
#   OUT=... scripts/bench-scaling-device.sh [DEV_DIR]
#
# DEV_DIR (default .dev, carried with the call) holds: rewind, llama-bench, the shared libraries both need
# (lib/), as scripts/bench-scaling-device.sh prepare DEV_DIR puts them there on the build machine.
# Environment: BUDGET_S (default 300): no new (model, threads) step starts after this many seconds of benchmarks;
# MODELS_DIR (default /tmp/rewind-scaling-models); SPECS: the bench-scaling.sh model arguments, in priority order
# (default: 0.8B at 16, 8, 4 threads; 9B at 16; 0.8B at 2, 1; 9B at 8; 35B-A3B at 16).
set -uo pipefail

if [ "${1:-}" = prepare ]; then
  # On the build machine: copy the binaries and the libraries they link that a bare machine may lack.
  dev=${2:-.dev} llama_bin=${LLAMA_BIN:-/work/llama/build-cpu/bin}
  mkdir -p "$dev/lib"
  cp build/rewind "$llama_bin/llama-bench" "$dev/"
  for bin in build/rewind "$llama_bin/llama-bench"; do
    ldd "$bin" | awk '/=> \// { print $3 }' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
      while read -r lib; do cp -L "$lib" "$dev/lib/"; done
  done
  cp -L "$llama_bin"/*.so* "$dev/lib/" 2>/dev/null || true
  du -sh "$dev"
  exit 0
fi

dev=${1:-.dev}
out=${OUT:?set OUT}
models=${MODELS_DIR:-/tmp/rewind-scaling-models}
mkdir -p "$out" "$models"
exec > >(while IFS= read -r line; do printf '[%4ds] %s\n' "$SECONDS" "$line"; done | tee -a "$out/log.txt") 2>&1
export LD_LIBRARY_PATH="$PWD/$dev/lib:${LD_LIBRARY_PATH:-}"
rewind=$PWD/$dev/rewind
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(free -g | awk '/Mem:/ {print $2}') GiB"
"$rewind" --help >/dev/null 2>&1 || { echo "rewind does not run here: $(ldd "$rewind" | grep 'not found')"; exit 1; }
vocab=tests/data/tokenizer/ggml-vocab-qwen35.gguf
make() {  # preset type file
  local t0=$SECONDS
  [ -s "$models/$3" ] || "$rewind" make-model --preset "$1" --type "$2" --vocab "$vocab" -o "$models/$3" --quiet ||
    { echo "make-model $1 $2 failed"; return 1; }
  echo "make-model $1 $2: $((SECONDS - t0)) s, $(du -h "$models/$3" | cut -f1)"
}
make qwen3.5-0.8b q8_0 0.8b-q8_0.gguf
make qwen3.5-9b q4_k_m 9b-q4_k_m.gguf
make qwen3.6-35b-a3b q4_k_m 35b-a3b-q4_k_m.gguf
cd "$models" || exit 1
specs=${SPECS:-"0.8b-q8_0.gguf@16,8,4 9b-q4_k_m.gguf@16 0.8b-q8_0.gguf@2,1 9b-q4_k_m.gguf@8 35b-a3b-q4_k_m.gguf@16"}
# shellcheck disable=SC2086
REWIND=$rewind LLAMA_BENCH=$OLDPWD/$dev/llama-bench "$OLDPWD/scripts/bench-scaling.sh" -b "${BUDGET_S:-300}" \
  -o "$out/table.md" $specs
echo "done in $SECONDS s"
