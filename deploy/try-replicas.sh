#!/usr/bin/env bash
# Try-out of a scaled-out rewind on loopback ports: Redis, N replicas sharing checkpoints through it, and haproxy
# in front (deploy/haproxy.cfg). No containers; Ctrl-C stops everything.
#   deploy/try-replicas.sh [--model M.gguf] [--replicas N] [--round-robin | --random] [--no-remote]
#                          [--front PORT] [--run CMD] [-- extra serve flags]
# --replicas N (default 3); --round-robin or --random turn affinity off (the worst case for caching; a client that
# sends a fixed number of requests per turn can fall into step with round-robin, --random cannot); --no-remote runs the
# replicas without Redis; --run CMD runs CMD once everything is up (REWIND_FRONT = the proxy's URL,
# REWIND_REPLICAS = the replicas' URLs), then stops everything and exits with CMD's status.
set -euo pipefail
cd "$(dirname "$0")/.."
model="" balance="balance hash var(txn.affinity)" front=8080 remote=1 n=3 run="" extra=()
while (($#)); do
  case "$1" in
    --model|-m) model="$2"; shift 2 ;;
    --replicas) n="$2"; shift 2 ;;
    --round-robin) balance="balance roundrobin"; shift ;;
    --random) balance="balance random"; shift ;;
    --front) front="$2"; shift 2 ;;
    --no-remote) remote=0; shift ;;
    --run) run="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
for tool in redis-server haproxy curl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: run scripts/install-deps.sh" >&2; exit 1; }
done
[ -x build/rewind ] || { echo "build/rewind is missing: run scripts/build.sh" >&2; exit 1; }
work=$(mktemp -d /tmp/rewind-replicas-XXXXXX)
pids=()
stop() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap stop EXIT INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work" --save "" --appendonly no \
  --maxmemory 2gb --maxmemory-policy allkeys-lru --logfile "$work/redis.log" & pids+=($!)
head -c 32 /dev/urandom | base64 > "$work/remote.key"  # the replicas' shared key (docs/replicas.md, "Trust")
urls=() servers=""
for i in $(seq "$n"); do
  p=$(free_port); urls+=("http://127.0.0.1:$p"); mkdir -p "$work/r$i"
  args=(serve --host 127.0.0.1 --port "$p" --cache-dir "$work/r$i" --log-requests=false)
  [ -n "$model" ] && args+=(-m "$model")
  ((remote)) && args+=(--remote-cache "redis://127.0.0.1:$redis_port" --remote-cache-key-file "$work/remote.key")
  build/rewind "${args[@]}" "${extra[@]}" >"$work/r$i.log" 2>&1 & pids+=($!)
  servers+="  server r$i 127.0.0.1:$p check inter 2s"$'\n'
done
front_url="http://127.0.0.1:$front"
python3 - "$work/haproxy.cfg" "$front" "$balance" "$servers" <<'PY'
import sys
out, front, balance, servers = sys.argv[1:]
cfg = open('deploy/haproxy.cfg').read()
open(out, 'w').write(cfg.replace('@FRONT@', front).replace('@BALANCE@', balance).replace('@SERVERS@\n', servers))
PY
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 & pids+=($!)
proxy_pid=$!
i=0
for u in "${urls[@]}"; do
  i=$((i + 1)) up=0
  for _ in $(seq 1200); do curl -sf "$u/health" >/dev/null && { up=1; break; }; sleep 0.5; done
  ((up)) || { echo "replica r$i ($u) did not come up: $(tail -3 "$work/r$i.log")" >&2; exit 1; }
done
for _ in $(seq 100); do curl -sf "$front_url/health" >/dev/null && break; sleep 0.1; done
echo "redis 127.0.0.1:$redis_port; replicas ${urls[*]}; proxy $front_url ($balance); logs in $work" >&2
if [ -n "$run" ]; then
  REWIND_FRONT="$front_url" REWIND_REPLICAS="${urls[*]}" bash -c "$run"
  exit $?
fi
echo "Ctrl-C stops everything." >&2
wait "$proxy_pid"  # a replica or Redis that dies (kill -9 it to try) leaves the others serving
