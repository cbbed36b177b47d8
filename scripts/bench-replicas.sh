#!/usr/bin/env bash
# Replicas behind a proxy that spreads requests at random (affinity off: the worst case), with and without the remote tier, against
# one replica: the public replay traces (../shared/bench) through each setup, Σprocessed/Σminimum side by side,
# and what the remote tier moved: bytes per reused token and the time to fetch a checkpoint.
#   scripts/bench-replicas.sh [--model M.gguf] [--traces DIR] [--replicas N] [--only "single remote noremote"]
# Without --traces, the traces are made with make_traces.py (seed 1); the restart trace is left out (it needs a
# restart command per replica). Replicas run with -c 65536, like scripts/replay-traces.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$(cd ../shared/bench 2>/dev/null && pwd || true)"
model=() traces="" n=3 only="single remote noremote"
while (($#)); do
  case "$1" in
    --model|-m) model=(--model "$2"); shift 2 ;;
    --traces) traces="$2"; shift 2 ;;
    --replicas) n="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;  # the setups to run (a long replay each); the others print as not run
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$bench" ] && [ -f "$bench/replay.py" ] || { echo "no ../shared/bench/replay.py" >&2; exit 1; }
work=$(mktemp -d /tmp/rewind-bench-replicas-XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ -z "$traces" ]; then
  traces="$work/traces"
  python3 "$bench/make_traces.py" "$traces" --seed 1 >/dev/null
fi
files=$(ls "$traces"/*.json | grep -v restart | tr '\n' ' ')
# One run: replay every trace through the proxy, then sum the remote tier's counters over the replicas.
measure='python3 '"$bench"'/replay.py --url "$REWIND_FRONT" --out "$OUT" '"$files"' >"$OUT.log" 2>&1;
  for u in $REWIND_REPLICAS; do curl -s "$u/metrics"; done | awk "/^rewind_remote_(fetched_bytes|fetch_microseconds|loaded)_total /{s[\$1]+=\$2} END{for(k in s) print k, s[k]}" >"$OUT.remote"'
run() {  # label, try-replicas flags...
  local label="$1"; shift
  [[ " $only " == *" $label "* ]] || return 0
  OUT="$work/$label.jsonl" deploy/try-replicas.sh "${model[@]}" "$@" --front "$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')" --run "$measure" -- -c 65536 2>/dev/null
  # replay.py's own summary (and its error, if a request failed).
  echo "== $label"; grep -E "processed/minimum|Error" "$work/$label.jsonl.log" | sed 's/^/   /'
}
run single --replicas 1 --no-remote
# Random, not round-robin: replay.py sends 3 requests per turn (/apply-template, /tokenize, the chat), which
# round-robin over 3 replicas would send to the same replica every time.
run remote --replicas "$n" --random
run noremote --replicas "$n" --random --no-remote
python3 - "$work" <<'PY'
import json, sys, os
work = sys.argv[1]
def load(label):
    p = os.path.join(work, label + '.jsonl')
    rows = [json.loads(l) for l in open(p) if l.strip()] if os.path.exists(p) else []
    proc = sum(r.get('processed') or 0 for r in rows)
    mini = sum(r.get('minimum') or 0 for r in rows)
    reused = sum(r.get('cached') or 0 for r in rows)
    remote = {}
    p = os.path.join(work, label + '.jsonl.remote')
    if os.path.exists(p):
        for line in open(p):
            k, v = line.split()
            remote[k] = float(v)
    return proc, mini, reused, rows, remote
res = {l: load(l) for l in ('single', 'remote', 'noremote')}
print(f"{'setup':<34} {'requests':>8} {'processed':>10} {'minimum':>9} {'ratio':>7}")
names = {'single': '1 replica', 'remote': 'replicas, random, remote tier', 'noremote': 'replicas, random, no remote'}
for l, (proc, mini, reused, rows, _) in res.items():
    print(f"{names[l]:<34} {len(rows):>8} {proc:>10} {mini:>9} {proc / max(mini, 1):>7.3f}")
r1 = res['single'][0] / max(res['single'][1], 1)
rr = res['remote'][0] / max(res['remote'][1], 1)
if res['single'][3] and res['remote'][3]:
    print(f"remote tier / single replica: {rr / r1:.3f} (goal <= 1.05)")
rem = res['remote'][4]
loaded = rem.get('rewind_remote_loaded_total', 0)
fetched = rem.get('rewind_remote_fetched_bytes_total', 0)
us = rem.get('rewind_remote_fetch_microseconds_total', 0)
reused = res['remote'][2]
print(f"remote: {int(loaded)} checkpoints loaded, {fetched / 2**20:.1f} MiB fetched, "
      f"{fetched / max(reused, 1):.0f} bytes per reused token, {us / 1e3 / max(loaded, 1):.1f} ms of lookup+fetch per load")
rows = res['noremote'][3]
pps = sorted(1e3 * r['ttft_s'] / r['processed'] for r in rows if (r.get('processed') or 0) >= 256)
if pps:
    print(f"recompute instead: {pps[len(pps) // 2]:.2f} ms per prompt token (median time to first token per "
          f"processed token, requests of >= 256 processed tokens, no remote tier)")
PY
