#!/usr/bin/env bash
# rewind serve next to llama-server on the same GGUF file: continuous-batching throughput (docs/performance.md).
#
#   scripts/bench-vs-llama-server.sh [-r REPS] [-t THREADS] [-s SLOTS] [-c "1 4 8"] [-w WORDS] [-n GEN]
#                                    [-q REQUESTS] [-e "rewind llama"] [-x "REWIND ARGS"] MODEL.gguf
#
# For each repetition and each number of concurrent clients, every engine in -e is started on its own (SLOTS
# slots, THREADS threads, 1024 tokens of context per slot), sent one warm-up request, then CLIENTS streaming
# clients of build/server/serve_bench, each sending REQUESTS chat requests of WORDS distinct words (about one
# token each; a new text per request and per run, so nothing is reused across clients or runs) that generate
# exactly GEN tokens (ignore_eos, temperature 0), and stopped. The engines take turns, the first alternating
# between repetitions, so drift of a shared machine hits them alike. Prints every run, then per concurrency the
# median (and range) of aggregate generated tokens/s and of mean time to first token, with ratios to llama-server,
# and the CPU seconds the server process used for the measured requests (steadier than wall time under load).
# Engines: rewind (the disk tier on, in a fresh folder per run: the default), rewind-nodisk (--cache-dir ''),
# llama (llama-server). Environment: REWIND (default build/rewind), SERVE_BENCH (build/server/serve_bench),
# LLAMA_SERVER (default llama-server on PATH); LD_LIBRARY_PATH as llama-server needs it.
set -euo pipefail

reps=3 threads=2 slots=8 concurrency="1 4 8" words=400 gen=48 requests=3 engines="rewind llama" extra=""
while getopts "r:t:s:c:w:n:q:e:x:h" opt; do
  case $opt in
    r) reps=$OPTARG ;;
    t) threads=$OPTARG ;;
    s) slots=$OPTARG ;;
    c) concurrency=$OPTARG ;;
    w) words=$OPTARG ;;
    n) gen=$OPTARG ;;
    q) requests=$OPTARG ;;
    e) engines=$OPTARG ;;
    x) extra=$OPTARG ;;
    *) sed -n '2,18p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { sed -n '2,18p' "$0"; exit 2; }
model=$1
ctx=1024
rewind=${REWIND:-build/rewind}
serve_bench=${SERVE_BENCH:-build/server/serve_bench}
llama_server=${LLAMA_SERVER:-llama-server}
command -v "$rewind" >/dev/null || { echo "no rewind at $rewind (set REWIND)" >&2; exit 2; }
command -v "$serve_bench" >/dev/null || { echo "no serve_bench at $serve_bench (set SERVE_BENCH)" >&2; exit 2; }
if [[ " $engines " == *" llama "* ]]; then
  command -v "$llama_server" >/dev/null || { echo "no llama-server (set LLAMA_SERVER)" >&2; exit 2; }
fi

# shellcheck source-path=SCRIPTDIR source=lib/bench-servers.sh
source "$(dirname "$0")/lib/bench-servers.sh"
bench_work bench-server

# Starts engine $1 on port $2 (log in $work/server.log); returns once /health answers 200.
start_server() {
  local engine=$1 port=$2
  case $engine in
    rewind | rewind-nodisk)
      local cache_dir="$work/cache-$RANDOM$RANDOM"
      [ "$engine" = rewind-nodisk ] && cache_dir=""
      # shellcheck disable=SC2086
      "$rewind" serve -m "$model" --host 127.0.0.1 --port "$port" --threads "$threads" --parallel "$slots" \
        -c "$ctx" --cache-dir "$cache_dir" $extra >"$work/server.log" 2>&1 &
      ;;
    llama)
      # llama-server's -c is the KV of all slots together.
      "$llama_server" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -tb "$threads" -np "$slots" \
        -c $((ctx * slots)) >"$work/server.log" 2>&1 &
      ;;
    *) echo "unknown engine $engine" >&2; exit 2 ;;
  esac
  server_pid=$!
  wait_health "$engine" "$port"
}

# One measurement: appends "engine clients tok/s ttft_mean_ms" to $results.
run_one() {
  local engine=$1 clients=$2 seed=$3 port out
  port=$(free_port)
  start_server "$engine" "$port"
  "$serve_bench" --url "http://127.0.0.1:$port" --clients 1 --requests 1 --prompt-words "$words" \
    --max-tokens "$gen" --ignore-eos --seed $((seed + 7777)) >/dev/null
  local cpu0 cpu1
  cpu0=$(awk '{ print $14 + $15 }' "/proc/$server_pid/stat")
  out=$("$serve_bench" --url "http://127.0.0.1:$port" --clients "$clients" --requests "$requests" \
    --prompt-words "$words" --max-tokens "$gen" --ignore-eos --seed "$seed") || {
    echo "serve_bench failed against $engine:" >&2; echo "$out" >&2; stop_server; return 0; }
  cpu1=$(awk '{ print $14 + $15 }' "/proc/$server_pid/stat")
  stop_server
  echo "$out" | awk -v e="$engine" -v c="$clients" '
    /generated_tokens\/s=/ { for (i = 1; i <= NF; ++i) if ($i ~ /^generated_tokens\/s=/) { split($i, a, "="); tps = a[2] } }
    /^ttft_ms mean=/ { split($2, a, "="); ttft = a[2] }
    /completion_tokens\/request=/ { for (i = 1; i <= NF; ++i) if ($i ~ /^completion_tokens\/request=/) { split($i, a, "="); per = a[2] } }
    /prompt_tokens\/request=/ { for (i = 1; i <= NF; ++i) if ($i ~ /^prompt_tokens\/request=/) { split($i, a, "="); pt = a[2] } }
    END { print e, c, tps, ttft, pt, per, cpu / ticks }' cpu=$((cpu1 - cpu0)) ticks="$(getconf CLK_TCK)" >>"$results"
  tail -n 1 "$results" | awk -v load="$(cut -d' ' -f1 /proc/loadavg)" '{ printf "run: %-14s clients %-2s %7.1f tok/s  ttft %7.0f ms  server cpu %6.1f s  load %s  (%s prompt, %s generated tokens per request)\n", $1, $2, $3, $4, $7, load, $5, $6 }' >&2
}

read -r -a engine_list <<<"$engines"
for ((rep = 0; rep < reps; ++rep)); do
  for c in $concurrency; do
    n=${#engine_list[@]}
    for ((k = 0; k < n; ++k)); do
      run_one "${engine_list[$(((k + rep) % n))]}" "$c" $((1000 * rep + c))
    done
  done
done

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $model, threads $threads, slots $slots, $words words, $gen tokens," \
  "$requests requests per client, $reps interleaved runs each"
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" "$engines" "$concurrency" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
engines, conc = sys.argv[2].split(), sys.argv[3].split()
ref = "llama" if "llama" in engines else engines[-1]
def stat(e, c, col):
    v = [float(r[col]) for r in rows if r[0] == e and r[1] == c and len(r) > col]
    return (statistics.median(v), min(v), max(v)) if v else None
head = "| clients | " + " | ".join(f"{e} tok/s" for e in engines) + " | " + \
       " | ".join(f"{e} / {ref}" for e in engines if e != ref) + " | " + \
       " | ".join(f"{e} TTFT ms" for e in engines) + " | " + \
       " | ".join(f"{e} / {ref} TTFT" for e in engines if e != ref) + " | " + \
       " | ".join(f"{e} server CPU s" for e in engines) + " |"
print(head)
print("|" + "---|" * head.count(" | ") + "---|")
for c in conc:
    tps = {e: stat(e, c, 2) for e in engines}
    cpu = {e: stat(e, c, 6) for e in engines}
    ttft = {e: stat(e, c, 3) for e in engines}
    fmt = lambda s, d: "-" if s is None else f"{s[0]:.{d}f} ({s[1]:.{d}f}-{s[2]:.{d}f})"
    ratio = lambda a, b: "-" if a is None or b is None or b[0] == 0 else f"{a[0] / b[0]:.2f}x"
    cells = [fmt(tps[e], 1) for e in engines] + [ratio(tps[e], tps[ref]) for e in engines if e != ref] + \
            [fmt(ttft[e], 0) for e in engines] + [ratio(ttft[e], ttft[ref]) for e in engines if e != ref] + \
            [fmt(cpu[e], 1) for e in engines]
    print(f"| {c} | " + " | ".join(cells) + " |")
PY
