# shellcheck shell=bash
# Sourced by the benchmark scripts that start servers (bench-depth.sh, bench-vs-llama-server.sh).
#
#   bench_work NAME     makes $work (a fresh /tmp/rewind-NAME-XXXXXX folder) and $results (empty) in it, and
#                       stops the server and removes the folder when the script exits
#   free_port           prints a free loopback TCP port
#   wait_health E PORT  waits until the server just started (pid in $server_pid, log in $work/server.log)
#                       answers /health with 200; if it dies or never answers, prints its log's tail, exits 1
#   stop_server         stops that server and waits for it

bench_work() {
  work=$(mktemp -d "/tmp/rewind-$1-XXXXXX")
  server_pid=""
  trap 'stop_server; rm -rf "$work"' EXIT
  results="$work/results"
  : >"$results"
}

stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_health() {
  local engine=$1 port=$2
  for _ in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.5
  done
  echo "$engine did not start:" >&2
  tail -n 20 "$work/server.log" >&2
  exit 1
}
