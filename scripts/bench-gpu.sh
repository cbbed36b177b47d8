#!/usr/bin/env bash
# The GPU comparison of issue 29, item 5, as one run on the device machine (docs/performance.md, "GPU: prepared
# comparison"): rewind bench --device vulkan0 next to llama.cpp v0.5.0's llama-bench built with -DGGML_VULKAN=ON
# (and, when LLAMA_CUDA_BENCH is set, its CUDA build), on the same files made there with make-model; and, on the
# 0.8B file, rewind bench --memory --device vulkan0 (checkpoint save / restore GB/s between device and host) and
# the three attention kernels at a depth of 8,192 (REWIND_GPU_ATTENTION), with and without the split of a decode
# row's key spans (REWIND_GPU_ATTENTION_SPLIT), beside llama-bench at that depth; every file once more with
# --gpu-profile (device time by kernel), and the 0.8B file with a barrier before every command.
#
#   scripts/bench-gpu.sh DIR
#
# DIR (carried): rewind (the binary), vocab.gguf (tests/data/tokenizer/ggml-vocab-qwen35.gguf), lib/ (shared
# libraries rewind and llama-bench need), llama-vulkan/ (llama-bench + its libggml*.so), debs/ (the Vulkan loader
# and GLVND from ../shared/device/fetch-vulkan-debs.sh). Writes $OUT/log.txt (every line with elapsed seconds)
# when OUT is set, else stdout. Models go to $MODELS (default /tmp/gpu-models).
set -uo pipefail
dir=${1:?usage: scripts/bench-gpu.sh DIR}
models=${MODELS:-/tmp/gpu-models}
log=${OUT:+$OUT/log.txt}
log=${log:-/dev/stdout}
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*" >>"$log"; }
run() { say "\$ $*"; "$@" 2>&1 | while IFS= read -r l; do say "  $l"; done; }

if [ -d "$dir/debs" ]; then
  for f in "$dir"/debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export LD_LIBRARY_PATH="$dir/lib:$dir/llama-vulkan:${LD_LIBRARY_PATH:-}"
rewind="$dir/rewind"
run "$rewind" --list-devices
run nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv

mkdir -p "$models"
# name preset type: the files of the issue (the 35B-A3B is qwen35moe: its experts run on the GPU too).
set -- "0.8b-q8_0 qwen3.5-0.8b q8_0" "9b-q4_k_m qwen3.5-9b q4_k_m" "35b-a3b-q4_k_m qwen3.6-35b-a3b q4_k_m"
for spec in "$@"; do
  read -r name preset type <<<"$spec"
  [ -f "$models/$name.gguf" ] || run "$rewind" make-model --preset "$preset" --type "$type" --vocab "$dir/vocab.gguf" -o "$models/$name.gguf"
done
for spec in "$@"; do
  read -r name _ _ <<<"$spec"
  f="$models/$name.gguf"
  run "$rewind" bench -m "$f" --device vulkan0 -ngl 99 -p 512 -n 128 -r 2
  # Where the device time goes, kernel by kernel (docs/gpu.md "Profiling").
  run "$rewind" bench -m "$f" --device vulkan0 -ngl 99 -p 512 -n 32 -r 1 --gpu-profile
  # Checkpoint save (device -> host) and restore (host -> device) GB/s, rollback costs (the issue's >= 10 GB/s).
  [ "$name" = 0.8b-q8_0 ] && run "$rewind" bench -m "$f" --device vulkan0 --memory -r 3
  # The attention kernels at depth (docs/gpu.md "Attention kernels": the same bits, kAuto's GPU choice unmeasured).
  if [ "$name" = 0.8b-q8_0 ]; then
    for k in serial parallel group; do
      say "REWIND_GPU_ATTENTION=$k"
      REWIND_GPU_ATTENTION=$k run "$rewind" bench -m "$f" --device vulkan0 -ngl 99 -p 512 -n 64 -d 8192 --depth-synthetic -r 1
    done
    # A decode row's key spans on workgroups of their own (kAuto on a GPU) against one workgroup a (row, head).
    say "REWIND_GPU_ATTENTION_SPLIT=0"
    REWIND_GPU_ATTENTION_SPLIT=0 run "$rewind" bench -m "$f" --device vulkan0 -ngl 99 -p 512 -n 64 -d 8192 --depth-synthetic -r 1
    run "$dir/llama-vulkan/llama-bench" -m "$f" -ngl 99 -p 512 -n 64 -d 8192 -r 1
    # The matmul variants (docs/gpu.md: the same bits; kAuto is rows for decode and tile for prefill on a GPU).
    say "REWIND_GPU_MATMUL=element"
    REWIND_GPU_MATMUL=element run "$rewind" bench -m "$f" --device vulkan0 -ngl 99 -p 512 -n 64 -r 1
    # A barrier before every command instead of only before dependent ones (docs/gpu.md "Barriers only where").
    say "REWIND_GPU_BARRIERS=all"
    REWIND_GPU_BARRIERS=all run "$rewind" bench -m "$f" --device vulkan0 -ngl 99 -p 512 -n 64 -r 1
    # The packed integer dot product (kAuto: on where the device says it is accelerated): off, for comparison.
    say "REWIND_GPU_INT_DOT=0"
    REWIND_GPU_INT_DOT=0 run "$rewind" bench -m "$f" --device vulkan0 -ngl 99 -p 512 -n 64 -r 1
  fi
  # The K-quant prefill tiles without the packed integer dot product, for comparison (docs/gpu.md).
  if [ "$name" = 9b-q4_k_m ]; then
    say "REWIND_GPU_INT_DOT=0"
    REWIND_GPU_INT_DOT=0 run "$rewind" bench -m "$f" --device vulkan0 -ngl 99 -p 512 -n 0 -r 1
  fi
  run "$dir/llama-vulkan/llama-bench" -m "$f" -ngl 99 -p 512 -n 128 -r 2
  [ -n "${LLAMA_CUDA_BENCH:-}" ] && run "$LLAMA_CUDA_BENCH" -m "$f" -ngl 99 -p 512 -n 128 -r 2
  run "$rewind" bench -m "$f" -t 16 -p 512 -n 128 -r 1
done
say done
