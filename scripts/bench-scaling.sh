#!/usr/bin/env bash
# rewind bench next to llama-bench at 1, 2, 4, 8, 16 threads (up to and including nproc), interleaved run by run
# on the same GGUF files (docs/performance.md, "Scaling with threads").
#
#   scripts/bench-scaling.sh [-r REPS] [-T "1 2 4 8 16"] [-p N_PROMPT] [-n N_GEN] [-b BUDGET_S] [-o TABLE]
#                            MODEL.gguf[@T1,T2,...]...
#
# For each repetition, model and thread count (largest first) it runs `rewind bench -r 1` and `llama-bench -r 1`
# once each, alternating which goes first, so drift of a shared machine hits both alike. Thread counts above
# nproc are dropped and nproc is added; MODEL@8,16 restricts one model to those counts. With -b, runs that
# would start after BUDGET_S seconds are skipped (and reported). Prints every run, then per model and thread
# count the medians of pp and tg for both, the ratios (rewind / llama.cpp), rewind's decode GB/s, the machine's
# read GB/s with that many threads streaming (from rewind bench) and the share of it the decode reached, and
# rewind's parallel regions per decode token and the cost of one. -o also writes the table to TABLE.
# Environment: REWIND (default build/rewind), LLAMA_BENCH (default: llama-bench on PATH); LD_LIBRARY_PATH as
# llama-bench needs it.
set -euo pipefail

reps=1 thread_list="1 2 4 8 16" n_prompt=512 n_gen=128 budget=0 table=""
while getopts "r:T:p:n:b:o:h" opt; do
  case $opt in
    r) reps=$OPTARG ;;
    T) thread_list=$OPTARG ;;
    p) n_prompt=$OPTARG ;;
    n) n_gen=$OPTARG ;;
    b) budget=$OPTARG ;;
    o) table=$OPTARG ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,17p' "$0"; exit 2; }
rewind=${REWIND:-build/rewind}
llama_bench=${LLAMA_BENCH:-llama-bench}
command -v "$rewind" >/dev/null || { echo "no rewind at $rewind (set REWIND)" >&2; exit 2; }
command -v "$llama_bench" >/dev/null || { echo "no llama-bench (set LLAMA_BENCH)" >&2; exit 2; }
ncpu=$(nproc)

# Thread counts for a model spec (MODEL or MODEL@T1,T2): the list (or the spec's own), capped at nproc, plus
# nproc; largest first.
threads_for() {
  local spec=$1 list=$thread_list
  [[ $spec == *@* ]] && list=${spec##*@} && list=${list//,/ }
  { for t in $list; do ((t <= ncpu)) && echo "$t"; done; [[ $spec == *@* ]] || echo "$ncpu"; } | sort -rnu
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
start=$SECONDS

# Appends "engine model threads key value" lines.
run_rewind() {
  "$rewind" bench -m "$1" -t "$2" -p "$n_prompt" -n "$n_gen" -r 1 2>/dev/null |
    awk -v m="$1" -v t="$2" '/^pp[0-9]+.* tok\/s$/ { print "rewind", m, t, "pp", $(NF-1) }
      /^tg[0-9]+.* tok\/s$/ { print "rewind", m, t, "tg", $(NF-1) }
      /decode bandwidth/ { print "rewind", m, t, "bw", $(NF-1) }
      /machine read bandwidth/ { for (i = 1; i <= NF; ++i) if ($i == "GB/s;") { print "rewind", m, t, "rbw", $(i-1); break } }
      /parallel regions per decode token/ { r = $6; sub(/;/, "", r); print "rewind", m, t, "regions", r;
                                             print "rewind", m, t, "region_ns", $10 }' >>"$results" ||
    echo "rewind bench failed on $1 at $2 threads" >&2
}
run_llama() {
  "$llama_bench" -m "$1" -t "$2" -p "$n_prompt" -n "$n_gen" -r 1 -o csv 2>/dev/null |
    awk -F, -v m="$1" -v t="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) { gsub(/"/, "", $i); col[$i] = i } next }
      { gsub(/"/, ""); k = ($col["n_prompt"] > 0) ? "pp" : "tg"; print "llama", m, t, k, $col["avg_ts"] }' >>"$results" ||
    echo "llama-bench failed on $1 at $2 threads" >&2
}

skipped=0
for ((rep = 0; rep < reps; ++rep)); do
  for spec in "$@"; do
    m=${spec%@*}
    for t in $(threads_for "$spec"); do
      if ((budget > 0 && SECONDS - start >= budget)); then
        echo "skipped (time budget ${budget}s): $m at $t threads, rep $rep" >&2
        skipped=$((skipped + 1))
        continue
      fi
      if ((rep % 2 == 0)); then run_rewind "$m" "$t"; run_llama "$m" "$t"; else run_llama "$m" "$t"; run_rewind "$m" "$t"; fi
      echo "[$((SECONDS - start))s] rep $rep: $(grep -F " $m $t " "$results" | awk '{printf "%s %s=%s ", $1, $4, $5}')" >&2
    done
  done
done

report() {
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $ncpu CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), pp$n_prompt tg$n_gen, $reps interleaved run(s) each, $((SECONDS - start)) s${skipped:+, $skipped run(s) skipped by the budget}"
  echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  printf '| %-26s | %3s | %-8s | %-8s | %-5s | %-8s | %-8s | %-5s | %-6s | %-6s | %-4s | %-7s | %-9s |\n' model t \
    "rw pp" "ll pp" ratio "rw tg" "ll tg" ratio "dec GB/s" "read GB/s" "%bw" regions/tok "ns/region"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for spec in "$@"; do
    m=${spec%@*}
    for t in $(threads_for "$spec"); do
      awk -v m="$m" -v t="$t" '
        function med(a, n,   i, j, x) {
          for (i = 2; i <= n; ++i) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; --j) a[j + 1] = a[j]; a[j + 1] = x }
          return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $2 == m && $3 == t { k = $1 SUBSEP $4; v[k, ++n[k]] = $5 }
        END {
          split("rewind pp,llama pp,rewind tg,llama tg,rewind bw,rewind rbw,rewind regions,rewind region_ns", keys, ",")
          any = 0
          for (q = 1; q <= 8; ++q) {
            split(keys[q], kk, " "); k = kk[1] SUBSEP kk[2]; c = n[k]; md[q] = 0
            if (c == 0) continue
            any = 1; delete a; for (i = 1; i <= c; ++i) a[i] = v[k, i]; md[q] = med(a, c)
          }
          if (!any) exit
          name = m; sub(/.*\//, "", name)
          f = "%.2f"
          printf "| %-26s | %3d | %-8s | %-8s | %-5s | %-8s | %-8s | %-5s | %-6s | %-6s | %-4s | %-7s | %-9s |\n", name, t,
            md[1] ? sprintf(f, md[1]) : "-", md[2] ? sprintf(f, md[2]) : "-", (md[1] && md[2]) ? sprintf("%.2fx", md[1] / md[2]) : "-",
            md[3] ? sprintf(f, md[3]) : "-", md[4] ? sprintf(f, md[4]) : "-", (md[3] && md[4]) ? sprintf("%.2fx", md[3] / md[4]) : "-",
            md[5] ? sprintf("%.1f", md[5]) : "-", md[6] ? sprintf("%.1f", md[6]) : "-", (md[5] && md[6]) ? sprintf("%.0f%%", 100 * md[5] / md[6]) : "-",
            md[7] ? sprintf("%.0f", md[7]) : "-", md[8] ? sprintf("%.0f", md[8]) : "-"
        }' "$results"
    done
  done
}
if [ -n "$table" ]; then report "$@" | tee "$table"; else report "$@"; fi
