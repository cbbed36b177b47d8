#!/usr/bin/env bash
# Vision tower speed side by side: rewind's encode (vision_bench) and llama.cpp's (llama-mtmd-cli: its "mtmd
# batch encoding done in N ms", the time in mtmd_batch_encode) on the same mmproj and image, interleaved for
# ROUNDS rounds. Per run: the encode's wall time by each tool's own clock and the whole process's CPU time (user
# + sys from /usr/bin/time, loading the files included; llama-mtmd-cli also runs the language model over the
# image's tokens and one step); then the medians, for docs/images.md.
#
#   scripts/bench-vision.sh [-t THREADS] [-r ROUNDS] [-f "FA ..."] MODEL.gguf MMPROJ.gguf IMAGE
#
# MODEL: a language model whose embedding length matches the mmproj (llama-mtmd-cli needs one; rewind's encode
# does not). -f: llama.cpp's -fa values to run, each every round (default "off"). THREADS default 2, ROUNDS 3.
# Environment: VISION_BENCH (default build/vision/vision_bench), LLAMA_MTMD_CLI (default llama-mtmd-cli on PATH).
# A deterministic 1024 x 768 image: scripts/make-bench-image.py IMAGE.png.
set -euo pipefail
threads=2 rounds=3 fa_list=off
usage() { sed -n '2,14p' "$0"; exit 2; }
while getopts "t:r:f:h" opt; do
  case $opt in
    t) threads=$OPTARG ;;
    r) rounds=$OPTARG ;;
    f) fa_list=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 3 ] || usage
model=$1 mmproj=$2 image=$3
vision_bench=${VISION_BENCH:-build/vision/vision_bench}
mtmd_cli=${LLAMA_MTMD_CLI:-llama-mtmd-cli}
command -v "$vision_bench" >/dev/null || { echo "no vision_bench at $vision_bench (set VISION_BENCH)" >&2; exit 2; }
command -v "$mtmd_cli" >/dev/null || { echo "no llama-mtmd-cli (set LLAMA_MTMD_CLI)" >&2; exit 2; }
work=$(mktemp -d /tmp/rewind-bench-vision-XXXXXX)
trap 'rm -rf "$work"' EXIT
rows="$work/rows"  # engine<TAB>encode seconds<TAB>process CPU seconds
: >"$rows"

cpu_of() { awk '{ printf "%.2f", $1 + $2 }' "$work/time"; }

echo "uptime before: $(uptime)"
for round in $(seq 1 "$rounds"); do
  /usr/bin/time -f '%U %S' -o "$work/time" \
    "$vision_bench" --mmproj "$mmproj" --image "$image" -t "$threads" -r 1 >"$work/rewind.log" 2>&1 ||
    { cat "$work/rewind.log" >&2; exit 1; }
  enc=$(sed -n 's/^run 1: encode \([0-9.]*\) s wall.*/\1/p' "$work/rewind.log")
  printf 'rewind\t%s\t%s\n' "$enc" "$(cpu_of)" | tee -a "$rows" | sed "s/^/round $round: /"
  for fa in $fa_list; do
    /usr/bin/time -f '%U %S' -o "$work/time" \
      "$mtmd_cli" -m "$model" --mmproj "$mmproj" --image "$image" -p "Describe the image." -n 1 --temp 0 \
      -c 4096 -t "$threads" -tb "$threads" -fa "$fa" >"$work/llama.log" 2>&1 ||
      { tail -20 "$work/llama.log" >&2; exit 1; }
    ms=$(sed -n 's/.*batch encoding done in \([0-9]*\) ms.*/\1/p' "$work/llama.log" | head -1)
    if [ -z "$ms" ]; then
      echo "no 'batch encoding done in' line in llama-mtmd-cli's log:" >&2
      tail -20 "$work/llama.log" >&2
      exit 1
    fi
    printf 'llama.cpp -fa %s\t%s\t%s\n' "$fa" "$(awk -v ms="$ms" 'BEGIN { printf "%.2f", ms / 1000 }')" "$(cpu_of)" |
      tee -a "$rows" | sed "s/^/round $round: /"
  done
done
echo "uptime after: $(uptime)"
grep -m1 '^image' "$work/rewind.log"
echo
echo "| engine | encode s (median of $rounds) | process CPU s (median) | runs: encode s / CPU s |"
echo "|---|---|---|---|"
cut -f1 "$rows" | awk '!seen[$0]++' | while IFS= read -r engine; do
  awk -F'\t' -v e="$engine" 'BEGIN { n = 0 }
    $1 == e { enc[n] = $2 + 0; cpu[n] = $3 + 0; runs = runs (n ? ", " : "") $2 " / " $3; n++ }
    function median(a, n,   i, j, t) {
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2
    }
    END { printf "| %s | %.2f | %.2f | %s |\n", e, median(enc, n), median(cpu, n), runs }' "$rows"
done
