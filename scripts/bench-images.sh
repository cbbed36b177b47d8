#!/usr/bin/env bash
# The llama.cpp issue 26994 scenario (scripts/image-scenario.py) against `rewind serve` and `llama-server`, each
# started fresh on the same model and mmproj (rewind with a fresh --cache-dir), one after the other; prints each
# server's rows (prompt tokens, prompt tokens processed, wall ms per request) for docs/images.md.
#
#   scripts/bench-images.sh [-t THREADS] MODEL.gguf MMPROJ.gguf IMAGE
#
# Environment: REWIND (default build/rewind), LLAMA_SERVER (default: llama-server on PATH); LD_LIBRARY_PATH as
# llama-server needs it.
set -euo pipefail
threads=2
while getopts "t:h" opt; do
  case $opt in
    t) threads=$OPTARG ;;
    *) sed -n '2,9p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 3 ] || { sed -n '2,9p' "$0"; exit 2; }
model=$1 mmproj=$2 image=$3
rewind=${REWIND:-build/rewind}
llama_server=${LLAMA_SERVER:-llama-server}
command -v "$rewind" >/dev/null || { echo "no rewind at $rewind (set REWIND)" >&2; exit 2; }
command -v "$llama_server" >/dev/null || { echo "no llama-server (set LLAMA_SERVER)" >&2; exit 2; }
# shellcheck source-path=SCRIPTDIR source=lib/bench-servers.sh
source "$(dirname "$0")/lib/bench-servers.sh"
bench_work bench-images

for engine in rewind llama-server; do
  port=$(free_port)
  case $engine in
    rewind) "$rewind" serve -m "$model" --mmproj "$mmproj" --host 127.0.0.1 --port "$port" --threads "$threads" \
              --cache-dir "$work/cache" >"$work/server.log" 2>&1 & ;;
    llama-server) "$llama_server" -m "$model" --mmproj "$mmproj" --host 127.0.0.1 --port "$port" -t "$threads" \
                    -tb "$threads" -np 1 -c 8192 >"$work/server.log" 2>&1 & ;;
  esac
  server_pid=$!
  wait_health "$engine" "$port"
  python3 "$(dirname "$0")/image-scenario.py" --url "http://127.0.0.1:$port" --image "$image" --label "$engine"
  stop_server
done
