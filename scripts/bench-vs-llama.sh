#!/usr/bin/env bash
# rewind bench next to llama-bench on the same GGUF files, interleaved run by run (docs/performance.md).
#
#   scripts/bench-vs-llama.sh [-r REPS] [-t THREADS] [-p N_PROMPT] [-n N_GEN] [-x "EXTRA ARGS"] MODEL.gguf...
#
# For each repetition and each model it runs `rewind bench -r 1` and `llama-bench -r 1` once each, alternating
# which goes first, so drift of a shared machine hits both alike. Prints every run, then per model the median and
# the range (min-max) of pp and tg for both, the ratios of the medians (rewind / llama.cpp) and rewind's decode
# bandwidth. EXTRA ARGS go to both programs (e.g. "-d 16384 -ctk q8_0 -ctv q8_0").
# Environment: REWIND (default build/rewind), LLAMA_BENCH (default: llama-bench on PATH); LD_LIBRARY_PATH as
# llama-bench needs it.
set -euo pipefail

reps=3 threads=2 n_prompt=512 n_gen=128 extra=""
while getopts "r:t:p:n:x:h" opt; do
  case $opt in
    r) reps=$OPTARG ;;
    t) threads=$OPTARG ;;
    p) n_prompt=$OPTARG ;;
    n) n_gen=$OPTARG ;;
    x) extra=$OPTARG ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,12p' "$0"; exit 2; }
rewind=${REWIND:-build/rewind}
llama_bench=${LLAMA_BENCH:-llama-bench}
command -v "$rewind" >/dev/null || { echo "no rewind at $rewind (set REWIND)" >&2; exit 2; }
command -v "$llama_bench" >/dev/null || { echo "no llama-bench (set LLAMA_BENCH)" >&2; exit 2; }

results=$(mktemp)
trap 'rm -f "$results"' EXIT

# Appends "engine model test tok/s" lines (and "rewind model bw GB/s").
run_rewind() {
  # shellcheck disable=SC2086
  "$rewind" bench -m "$1" -t "$threads" -p "$n_prompt" -n "$n_gen" -r 1 $extra 2>/dev/null |
    awk -v m="$1" '/^pp[0-9]+.* tok\/s$/ { print "rewind", m, "pp", $(NF-1) }
                   /^tg[0-9]+.* tok\/s$/ { print "rewind", m, "tg", $(NF-1) }
                   /decode bandwidth/ { print "rewind", m, "bw", $(NF-1) }' >>"$results" ||
    echo "rewind bench failed on $1" >&2
}
run_llama() {
  # shellcheck disable=SC2086
  "$llama_bench" -m "$1" -t "$threads" -p "$n_prompt" -n "$n_gen" -r 1 -o csv $extra 2>/dev/null |
    awk -F, -v m="$1" 'NR == 1 { for (i = 1; i <= NF; ++i) { gsub(/"/, "", $i); col[$i] = i } next }
      { gsub(/"/, ""); t = ($col["n_prompt"] > 0) ? "pp" : "tg"; print "llama", m, t, $col["avg_ts"] }' >>"$results" ||
    echo "llama-bench failed on $1" >&2
}

for ((rep = 0; rep < reps; ++rep)); do
  for m in "$@"; do
    if ((rep % 2 == 0)); then run_rewind "$m"; run_llama "$m"; else run_llama "$m"; run_rewind "$m"; fi
    grep -F " $m " "$results" | tail -n 5 | sed "s/^/rep $rep: /" >&2
  done
done

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), threads $threads, pp$n_prompt tg$n_gen, $reps interleaved runs each${extra:+, extra: $extra}"
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %-28s | %-22s | %-22s | %-5s | %-22s | %-22s | %-5s | %-8s |\n' model "rewind pp (range)" \
  "llama.cpp pp (range)" ratio "rewind tg (range)" "llama.cpp tg (range)" ratio "GB/s"
echo "|---|---|---|---|---|---|---|---|"
for m in "$@"; do
  awk -v m="$m" '
    function med(a, n,   i, j, t) {  # a[1..n] sorted in place
      for (i = 2; i <= n; ++i) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; --j) a[j + 1] = a[j]; a[j + 1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $2 == m { k = $1 SUBSEP $3; v[k, ++n[k]] = $4 }
    END {
      split("rewind pp,llama pp,rewind tg,llama tg,rewind bw", keys, ",")
      for (q = 1; q <= 5; ++q) {
        split(keys[q], kk, " "); k = kk[1] SUBSEP kk[2]; c = n[k]
        if (c == 0) { s[q] = "-"; md[q] = 0; continue }
        delete a; for (i = 1; i <= c; ++i) a[i] = v[k, i]
        md[q] = med(a, c); s[q] = sprintf("%.2f (%.2f-%.2f)", md[q], a[1], a[c])
      }
      name = m; sub(/.*\//, "", name)
      printf "| %-28s | %-22s | %-22s | %-5s | %-22s | %-22s | %-5s | %-8s |\n", name, s[1], s[2],
        (md[2] > 0 ? sprintf("%.2fx", md[1] / md[2]) : "-"), s[3], s[4],
        (md[4] > 0 ? sprintf("%.2fx", md[3] / md[4]) : "-"), (md[5] > 0 ? sprintf("%.2f", md[5]) : "-")
    }' "$results"
done
