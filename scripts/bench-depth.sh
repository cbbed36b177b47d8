#!/usr/bin/env bash
# rewind next to llama.cpp at context depth, on the same GGUF files (docs/long-context.md, docs/performance.md).
#
#   scripts/bench-depth.sh [-r REPS] [-t THREADS] [-d "0 4096 16384 65536 131072"] [-p N_PROMPT] [-n N_GEN]
#                          [-T TTFT_WORDS] [-x "EXTRA ARGS"] MODEL.gguf...
#
# Part 1, per model and depth D: `rewind bench -d D --depth-synthetic` and `llama-bench -d D`, -r 1 each,
# alternating which goes first, REPS times: pp N_PROMPT and tg N_GEN at position D. rewind fills the depth's KV
# rows with random values (the same attention work as a prefilled context, without the wait); llama-bench
# prefills D tokens before each test (untimed). Prints every run, then per model and depth the medians (ranges)
# and the ratios rewind / llama.cpp.
# Part 2 (-T WORDS > 0, first model only): cold time to first token of one chat request of WORDS distinct words
# (one to two tokens each, by the vocabulary: the prompt row says how many) with max_tokens 1, against `rewind
# serve` and `llama-server` started fresh for each run (one slot, context 2 x WORDS + 1024), engines alternating,
# REPS times (build/server/serve_bench measures it).
# EXTRA ARGS go to both bench programs (e.g. "-ctk q8_0 -ctv q8_0").
# Environment: REWIND (default build/rewind), LLAMA_BENCH, LLAMA_SERVER (default: on PATH), SERVE_BENCH
# (default build/server/serve_bench); LD_LIBRARY_PATH as llama.cpp needs it.
set -euo pipefail

reps=3 threads=2 depths="0 4096 16384 65536 131072" n_prompt=512 n_gen=32 ttft_words=0 extra=""
while getopts "r:t:d:p:n:T:x:h" opt; do
  case $opt in
    r) reps=$OPTARG ;;
    t) threads=$OPTARG ;;
    d) depths=$OPTARG ;;
    p) n_prompt=$OPTARG ;;
    n) n_gen=$OPTARG ;;
    T) ttft_words=$OPTARG ;;
    x) extra=$OPTARG ;;
    *) sed -n '2,19p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,19p' "$0"; exit 2; }
rewind=${REWIND:-build/rewind}
llama_bench=${LLAMA_BENCH:-llama-bench}
llama_server=${LLAMA_SERVER:-llama-server}
serve_bench=${SERVE_BENCH:-build/server/serve_bench}
command -v "$rewind" >/dev/null || { echo "no rewind at $rewind (set REWIND)" >&2; exit 2; }
command -v "$llama_bench" >/dev/null || { echo "no llama-bench (set LLAMA_BENCH)" >&2; exit 2; }
if ((ttft_words > 0)); then
  command -v "$llama_server" >/dev/null || { echo "no llama-server (set LLAMA_SERVER)" >&2; exit 2; }
  command -v "$serve_bench" >/dev/null || { echo "no serve_bench at $serve_bench (set SERVE_BENCH)" >&2; exit 2; }
fi

# shellcheck source-path=SCRIPTDIR source=lib/bench-servers.sh
source "$(dirname "$0")/lib/bench-servers.sh"
bench_work bench-depth

# Appends "engine model depth pp|tg tok/s" lines.
run_rewind() {
  local m=$1 d=$2 synth=""
  ((d > 0)) && synth="--depth-synthetic"
  # shellcheck disable=SC2086
  "$rewind" bench -m "$m" -t "$threads" -p "$n_prompt" -n "$n_gen" -d "$d" $synth -r 1 $extra 2>/dev/null |
    awk -v m="$m" -v d="$d" '/^pp[0-9]+.* tok\/s$/ { print "rewind", m, d, "pp", $(NF-1) }
                             /^tg[0-9]+.* tok\/s$/ { print "rewind", m, d, "tg", $(NF-1) }' >>"$results" ||
    echo "rewind bench failed on $m at depth $d" >&2
}
run_llama() {
  local m=$1 d=$2
  # shellcheck disable=SC2086
  "$llama_bench" -m "$m" -t "$threads" -p "$n_prompt" -n "$n_gen" -d "$d" -r 1 -o csv $extra 2>/dev/null |
    awk -F, -v m="$m" -v d="$d" 'NR == 1 { for (i = 1; i <= NF; ++i) { gsub(/"/, "", $i); col[$i] = i } next }
      { gsub(/"/, ""); t = ($col["n_prompt"] > 0) ? "pp" : "tg"; print "llama", m, d, t, $col["avg_ts"] }' >>"$results" ||
    echo "llama-bench failed on $m at depth $d" >&2
}

for ((rep = 0; rep < reps; ++rep)); do
  for m in "$@"; do
    for d in $depths; do
      if ((rep % 2 == 0)); then run_rewind "$m" "$d"; run_llama "$m" "$d"; else run_llama "$m" "$d"; run_rewind "$m" "$d"; fi
      grep -F " $m $d " "$results" | tail -n 4 | sed "s/^/rep $rep: /" >&2
    done
  done
done

# Cold TTFT: a fresh server per run, one warm-up request of a few words (loads the weights), then the long one.
run_ttft() {
  local engine=$1 m=$2 seed=$3 port ctx out
  port=$(free_port)
  ctx=$((2 * ttft_words + 1024))  # a word is one or two tokens
  case $engine in
    rewind) "$rewind" serve -m "$m" --host 127.0.0.1 --port "$port" --threads "$threads" --parallel 1 -c "$ctx" \
              --cache-dir '' >"$work/server.log" 2>&1 & ;;
    llama) "$llama_server" -m "$m" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" -np 1 -c "$ctx" \
             >"$work/server.log" 2>&1 & ;;
  esac
  server_pid=$!
  wait_health "$engine" "$port"
  "$serve_bench" --url "http://127.0.0.1:$port" --clients 1 --requests 1 --prompt-words 8 --max-tokens 1 \
    --seed $((seed + 7777)) >/dev/null
  out=$("$serve_bench" --url "http://127.0.0.1:$port" --clients 1 --requests 1 --prompt-words "$ttft_words" \
    --max-tokens 1 --seed "$seed") || { echo "serve_bench failed against $engine" >&2; stop_server; return 0; }
  stop_server
  echo "$out" | awk -v e="$engine" -v m="$m" '/^ttft_ms mean=/ { split($2, a, "="); print e, m, "ttft", "ttft", a[2] }
    /prompt_tokens\/request=/ { for (i = 1; i <= NF; ++i) if ($i ~ /^prompt_tokens\/request=/) { split($i, a, "="); print e, m, "ttft", "prompt", a[2] } }' >>"$results"
  tail -n 2 "$results" | sed "s/^/ttft run: /" >&2
}
if ((ttft_words > 0)); then
  for ((rep = 0; rep < reps; ++rep)); do
    if ((rep % 2 == 0)); then run_ttft rewind "$1" "$rep"; run_ttft llama "$1" "$rep"; else run_ttft llama "$1" "$rep"; run_ttft rewind "$1" "$rep"; fi
  done
fi

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), threads $threads, pp$n_prompt tg$n_gen, $reps interleaved runs each${extra:+, extra: $extra}"
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def stat(e, m, d, t):
    v = sorted(float(r[4]) for r in rows if r[:4] == [e, m, d, t])
    return (statistics.median(v), v[0], v[-1]) if v else None
fmt = lambda s, k=2: "-" if s is None else f"{s[0]:.{k}f} ({s[1]:.{k}f}-{s[2]:.{k}f})"
ratio = lambda a, b: "-" if a is None or b is None or b[0] == 0 else f"{a[0] / b[0]:.2f}x"
keys = []
for r in rows:
    if r[2] != "ttft" and (r[1], r[2]) not in keys: keys.append((r[1], r[2]))
print("| model | depth | rewind pp (range) | llama.cpp pp (range) | ratio | rewind tg (range) | llama.cpp tg (range) | ratio |")
print("|---|---|---|---|---|---|---|---|")
for m, d in keys:
    rp, lp, rt, lt = (stat(e, m, d, t) for e, t in (("rewind", "pp"), ("llama", "pp"), ("rewind", "tg"), ("llama", "tg")))
    print(f"| {m.split('/')[-1]} | {d} | {fmt(rp)} | {fmt(lp)} | {ratio(rp, lp)} | {fmt(rt)} | {fmt(lt)} | {ratio(rt, lt)} |")
tt = [(r[0], r[1]) for r in rows if r[2] == "ttft"]
for m in dict.fromkeys(m for _, m in tt):
    rw, ll = stat("rewind", m, "ttft", "ttft"), stat("llama", m, "ttft", "ttft")
    pr, pl = stat("rewind", m, "ttft", "prompt"), stat("llama", m, "ttft", "prompt")
    print(f"\ncold TTFT, {m.split('/')[-1]}: rewind {fmt(rw, 0)} ms ({fmt(pr, 0)} prompt tokens), "
          f"llama-server {fmt(ll, 0)} ms ({fmt(pl, 0)} prompt tokens): llama-server / rewind {ratio(ll, rw)}")
PY
