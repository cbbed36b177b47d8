#!/usr/bin/env bash
# Prefix-cache benchmark: replays the workload traces against a fresh `rewind serve` per trace (tiny demo model,
# default settings, -c 65536 like the issue's runs) and prints Σprocessed / Σminimum per trace (1.000 = the
# physical limit). The trace tools are not part of this repo; pass the folder that holds make_traces.py and
# replay.py (default: ../shared/bench).
#
#   scripts/replay-traces.sh [--seed N] [--bench DIR] [--rewind BIN] [--port P] [TRACE_NAME ...]
#
# The restart trace kills the server with SIGKILL where the trace says so and starts it again on the same
# --cache-dir (the command passed to replay.py --restart-cmd).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
seed=1
bench="$here/../shared/bench"
bin="$here/build/rewind"
port=18480
names=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seed) seed="$2"; shift 2 ;;
    --bench) bench="$2"; shift 2 ;;
    --rewind) bin="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) names+=("$1"); shift ;;
  esac
done
[[ -x "$bin" ]] || { echo "no rewind binary at $bin (scripts/build.sh first)" >&2; exit 1; }
[[ -f "$bench/replay.py" ]] || { echo "no replay.py in $bench (--bench DIR)" >&2; exit 1; }
work="$(mktemp -d /tmp/rewind-replay.XXXXXX)"
trap 'kill -9 $(cat "$work/pid" 2>/dev/null) 2>/dev/null || true' EXIT
python3 "$bench/make_traces.py" "$work/traces" --seed "$seed" >/dev/null
if [[ ${#names[@]} -eq 0 ]]; then
  names=(chat-reasoning agent-tools timestamp-system compaction regenerate-branch shared-prefix-agents restart
         many-sessions)
fi
cat > "$work/start.sh" <<START
#!/usr/bin/env bash
kill -9 \$(cat "$work/pid" 2>/dev/null) 2>/dev/null || true
sleep 0.2
"$bin" serve --port $port -c 65536 --cache-dir "$work/cache" >>"$work/server.log" 2>&1 &
echo \$! > "$work/pid"
for i in \$(seq 1 600); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && exit 0
  sleep 0.1
done
echo "server did not start (see $work/server.log)" >&2
exit 1
START
chmod +x "$work/start.sh"
for name in "${names[@]}"; do
  rm -rf "$work/cache"
  "$work/start.sh"
  python3 "$bench/replay.py" --url "http://127.0.0.1:$port" --restart-cmd "$work/start.sh" \
    --out "$work/$name.jsonl" "$work/traces/$name.json" | grep -v '^TOTAL'
done
kill -9 "$(cat "$work/pid")" 2>/dev/null || true
echo "rows and server log: $work"
