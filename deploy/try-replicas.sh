#!/usr/bin/env bash
# Try-out of a scaled-out rewind on loopback ports: Redis, 3 replicas sharing checkpoints through it, and
# haproxy in front (deploy/haproxy.cfg). No containers; Ctrl-C stops everything.
#   deploy/try-replicas.sh [--model M.gguf] [--round-robin] [--front PORT] [--no-remote] [-- extra serve flags]
# --round-robin turns affinity off (the worst case for caching); --no-remote runs the replicas without Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
model="" balance="balance hash var(txn.affinity)" front=8080 remote=1 extra=()
while (($#)); do
  case "$1" in
    --model|-m) model="$2"; shift 2 ;;
    --round-robin) balance="balance roundrobin"; shift ;;
    --front) front="$2"; shift 2 ;;
    --no-remote) remote=0; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
for tool in redis-server haproxy; do
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
ports=()
for i in 1 2 3; do
  p=$(free_port); ports+=("$p"); mkdir -p "$work/r$i"
  args=(serve --host 127.0.0.1 --port "$p" --cache-dir "$work/r$i")
  [ -n "$model" ] && args+=(-m "$model")
  ((remote)) && args+=(--remote-cache "redis://127.0.0.1:$redis_port")
  build/rewind "${args[@]}" "${extra[@]}" >"$work/r$i.log" 2>&1 & pids+=($!)
done
sed -e "s/@FRONT@/$front/" -e "s/@R1@/${ports[0]}/" -e "s/@R2@/${ports[1]}/" -e "s/@R3@/${ports[2]}/" \
    -e "s/@BALANCE@/$balance/" deploy/haproxy.cfg >"$work/haproxy.cfg"
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 & pids+=($!)
for p in "${ports[@]}"; do
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$p/health" >/dev/null && break; sleep 0.5; done
done
echo "redis 127.0.0.1:$redis_port, replicas ${ports[*]}, proxy http://127.0.0.1:$front ($balance); logs in $work"
echo "Ctrl-C stops everything."
wait -n "${pids[@]}"
