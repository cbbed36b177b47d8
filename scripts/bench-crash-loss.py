#!/usr/bin/env python3
"""How soon a response's end state survives a crash (docs/performance.md, "Crash loss").

Starts `REWIND serve` on a fresh --cache-dir, sends a chat of TURNS turns (each turn appends the answer and a new
user message of WORDS random words), and after each response reads /metrics: how long after the response's end
its end state was in place for a restart (rewind_cache_disk_visible_*) and synced (rewind_cache_disk_durable_*),
and how long the response's last event waited for it (rewind_server_cache_disk_wait_*, --cache-disk-wait).
With --kill, the server is then killed with SIGKILL right after each response and restarted on the same folder,
and each turn's cache report says where it resumed: the same positions as without --kill when a crash right after
a response loses nothing.

  scripts/bench-crash-loss.py --rewind build/rewind [--turns 4] [--words 300] [--wait-ms 1000] [--kill]
      [-- extra serve flags, e.g. -m model.gguf]
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=600) as r:
        return r.read().decode()


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.loads(r.read())


def metrics(port):
    out = {}
    for line in get(port, "/metrics").splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def start(args, folder, log):
    cmd = [args.rewind, "serve", "--port", str(args.port), "-c", "65536", "--cache-dir", folder,
           "--cache-disk-wait", str(args.wait_ms)] + args.serve
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        try:
            get(args.port, "/health")
            return proc
        except OSError:
            time.sleep(0.1)
    sys.exit("server did not start: " + " ".join(cmd))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rewind", required=True, help="rewind binary (or a wrapper script)")
    ap.add_argument("--port", type=int, default=18751)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--wait-ms", type=int, default=1000)
    ap.add_argument("--kill", action="store_true", help="kill -9 right after each response, then restart")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("serve", nargs="*", help="extra `rewind serve` flags (after --)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    words = ["alpha", "river", "stone", "light", "number", "garden", "signal", "paper", "window", "engine",
             "market", "winter", "silver", "forest", "planet", "story", "bridge", "candle", "letter", "orange"]
    folder = tempfile.mkdtemp(prefix="rewind-crash-")
    log = open(os.path.join(folder, "server.log"), "w")
    cache = os.path.join(folder, "cache")
    proc = start(args, cache, log)
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    before = metrics(args.port)
    rows = []
    try:
        for turn in range(args.turns):
            messages.append({"role": "user", "content": " ".join(rng.choice(words) for _ in range(args.words))})
            t0 = time.monotonic()
            r = post(args.port, "/v1/chat/completions",
                     {"messages": messages, "max_tokens": args.max_tokens, "temperature": 0})
            wall = time.monotonic() - t0
            messages.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
            report = r.get("cache", {})
            if args.kill:  # the kill comes right after the response; then the previous server's numbers are gone
                after = metrics(args.port)
            else:
                time.sleep(2.0)  # let the sync after the index finish (durable)
                after = metrics(args.port)

            def delta(name):
                return after.get(name, 0) - before.get(name, 0)

            n = delta("rewind_cache_disk_durable_total")
            row = {
                "turn": turn + 1,
                "prompt": r["usage"]["prompt_tokens"],
                "resumed": report.get("resume_pos"),
                "source": report.get("source"),
                "wall_ms": round(wall * 1e3, 1),
                "waited_ms": round(delta("rewind_server_cache_disk_wait_microseconds_total") / 1e3, 1),
                "wait_timeouts": int(delta("rewind_server_cache_disk_wait_timeouts_total")),
                "visible_ms": round(delta("rewind_cache_disk_visible_microseconds_total") / 1e3 / n, 1) if n else None,
                "durable_ms": round(delta("rewind_cache_disk_durable_microseconds_total") / 1e3 / n, 1) if n else None,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.kill:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                proc = start(args, cache, log)
                before = metrics(args.port)
            else:
                before = after
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    print("server log and cache:", folder)


if __name__ == "__main__":
    main()
