"""Hostile requests against `rewind serve` (ctest adversarial_requests, label e2e; python3 stdlib only).

Each hostile request of issue 31 is sent while a bystander client keeps sending a small chat request with its
own key. The suite checks, for each hostile request, a clean 4xx (or a bounded answer), that every bystander
request succeeds within BYSTANDER_BOUND_S, and that the server's resident memory grows by less than
RSS_BOUND_MIB over the whole run. It prints what it measured (latency of each hostile answer, the bystander's
worst latency, RSS before and after).

Usage: adversarial_test.py REWIND_BINARY [WORK_DIR]
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import rewind_http  # noqa: E402  (the shared helpers, found through the line above)

BYSTANDER_BOUND_S = 30.0  # generous on a loaded 2-core runner; a stalled engine (the bug) never answers
RSS_BOUND_MIB = 256       # the 10^6-enum schema alone used to add 900 MiB
KEYS = ("alice-key", "bob-key")


def request(port, method, path, body=None, key=KEYS[0], raw=None, timeout=120):
    return rewind_http.request(port, method, path, body, key=key, raw=raw, timeout=timeout)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class Server:
    def __init__(self, binary, args, log_path):
        self.log = open(log_path, "wb")
        self.log_path = log_path
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        self.port = None
        while self.port is None:
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("server did not start:\n" + self.tail())
            m = re.search(r"listening on http://[\d.]+:(\d+)", open(log_path, errors="replace").read())
            if m:
                self.port = int(m.group(1))
            time.sleep(0.05)
        while request(self.port, "GET", "/health", key=None)[0] != 200:
            if time.time() > deadline:
                raise RuntimeError("model did not load:\n" + self.tail())
            time.sleep(0.05)

    def tail(self, n=30):
        return "\n".join(open(self.log_path, errors="replace").read().splitlines()[-n:])

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Bystander(threading.Thread):
    """Another client's small chat request, over and over, with its own key."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.latencies = []
        self.failures = []

    def run(self):
        body = {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8, "temperature": 0}
        while not self.stop.is_set():
            t = time.time()
            try:
                status, j = request(self.port, "POST", "/v1/chat/completions", body, key=KEYS[1],
                                    timeout=BYSTANDER_BOUND_S * 4)
            except OSError as e:
                status, j = -1, str(e)
            dt = time.time() - t
            self.latencies.append(dt)
            if status != 200:
                self.failures.append(f"bystander got {status}: {str(j)[:200]}")
            elif dt > BYSTANDER_BOUND_S:
                self.failures.append(f"bystander waited {dt:.1f} s (bound {BYSTANDER_BOUND_S} s)")


def chat(extra):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    body.update(extra)
    return body


def hostile_cases(huge_grammar):
    enum = "[" + ",".join(str(i) for i in range(1000000)) + "]"
    schema_body = ('{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"json_schema":{"enum":%s}}'
                   % enum).encode()
    tools = [{"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object"}}}
             for i in range(5000)]
    deep = ("[" * 100000 + "]" * 100000).encode()
    return [
        # (name, method, path, body, raw body, key, expected status, text the error must contain)
        ("200,000 dry_sequence_breakers", "POST", "/v1/chat/completions",
         chat({"dry_multiplier": 0.8, "dry_sequence_breakers": ["x%d" % i for i in range(200000)]}), None,
         KEYS[0], 400, "--max-dry-breakers"),
        ("a 100 kB DRY breaker", "POST", "/v1/chat/completions",
         chat({"dry_multiplier": 0.8, "dry_sequence_breakers": ["y" * 100000]}), None, KEYS[0], 400,
         "--max-dry-breaker-length"),
        ("200,000 logit_bias entries (object)", "POST", "/v1/chat/completions",
         chat({"logit_bias": {str(i): 1 for i in range(200000)}}), None, KEYS[0], 400, "--max-json-members"),
        ("200,000 logit_bias entries (pairs)", "POST", "/completion",
         {"prompt": "hi", "n_predict": 4, "logit_bias": [[i % 200, 1.0] for i in range(200000)]}, None, KEYS[0],
         400, "--max-logit-bias|--max-json-values"),
        ("a JSON schema with a 10^6-long enum", "POST", "/v1/chat/completions", None, schema_body, KEYS[0], 400,
         "--max-json-values"),
        ("a grammar whose repetitions explode", "POST", "/v1/chat/completions", chat({"grammar": huge_grammar}),
         None, KEYS[0], 400, "--max-grammar-elements"),
        ("100,000 stop strings", "POST", "/v1/completions",
         {"prompt": "hi", "max_tokens": 4, "stop": ["s%d" % i for i in range(100000)]}, None, KEYS[0], 400,
         "--max-stop"),
        ("5,000 tools", "POST", "/v1/chat/completions", chat({"tools": tools}), None, KEYS[0], 400,
         "--max-tools"),
        ("top_logprobs 1000", "POST", "/v1/chat/completions", chat({"logprobs": True, "top_logprobs": 1000}),
         None, KEYS[0], 400, "top_logprobs"),
        ("n = 64", "POST", "/v1/chat/completions", chat({"n": 64}), None, KEYS[0], 400, "n = 1"),
        ("100,000 nested arrays", "POST", "/v1/chat/completions", None, deep, KEYS[0], 400, "nests deeper"),
        ("a Messages request past a limit", "POST", "/v1/messages",
         {"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}],
          "stop_sequences": ["s%d" % i for i in range(1000)]}, None, KEYS[0], 400, "--max-stop"),
        ("a wrong key", "POST", "/v1/chat/completions", chat({}), None, "not-a-key", 401, ""),
        ("no key", "POST", "/v1/responses", {"input": "hi"}, None, None, 401, ""),
        ("GET /props without the key", "GET", "/props", None, None, None, 401, ""),
        ("POST /props", "POST", "/props", {"n_ctx": 1}, None, KEYS[0], 501, "--props"),
    ]


def main():
    binary = os.path.abspath(sys.argv[1])
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="rewind-adversarial-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = subprocess.run([binary, "make-model", "--demo", "f32", "-q"], check=True, capture_output=True,
                           text=True).stdout.strip().splitlines()[-1]
    server = Server(binary, ["-m", model, "--parallel", "4", "-t", "2", "-c", "2048", "--no-cache",
                             "--api-key", ",".join(KEYS)], os.path.join(work, "server.log"))
    failures = []
    t0 = time.time()
    try:
        request(server.port, "POST", "/v1/chat/completions", chat({}))  # warm up
        rss0 = rss_mib(server.proc.pid)
        bystander = Bystander(server.port)
        bystander.start()
        huge_grammar = 'root ::= "' + "a" * 1000 + '"{10000}'
        for name, method, path, body, raw, key, want, text in hostile_cases(huge_grammar):
            t = time.time()
            status, j = request(server.port, method, path, body, key=key, raw=raw)
            dt = time.time() - t
            message = json.dumps(j)[:300]
            ok = status == want and any(t in message for t in text.split("|"))
            print(f"{'ok ' if ok else 'BAD'} {dt * 1000:7.0f} ms  {status}  {name}")
            if not ok:
                failures.append(f"{name}: wanted {want} with '{text}', got {status} {message}")
        # Within the limits, the prepared work still runs off the engine thread: DRY with the most breakers
        # allowed, a big logit_bias and a grammar near its bound, each answered.
        allowed = [
            ("64 DRY breakers of 64 bytes", chat({"dry_multiplier": 0.8,
                                                  "dry_sequence_breakers": [chr(65 + i % 26) * 64 for i in range(64)]})),
            ("1,024 logit_bias entries", chat({"logit_bias": {str(i): -1 for i in range(1024)}})),
            ("a grammar of 100,000 elements", chat({"grammar": 'root ::= "' + "b" * 100 + '"{1000}',
                                                    "max_tokens": 2})),
        ]
        for name, body in allowed:
            t = time.time()
            status, j = request(server.port, "POST", "/v1/chat/completions", body)
            dt = time.time() - t
            print(f"{'ok ' if status == 200 else 'BAD'} {dt * 1000:7.0f} ms  {status}  {name}")
            if status != 200:
                failures.append(f"{name}: {status} {json.dumps(j)[:300]}")
        # Isolation: a stored response is readable with its own key only.
        status, first = request(server.port, "POST", "/v1/responses", {"input": "hi", "max_output_tokens": 4})
        if status != 200:
            failures.append(f"responses: {status} {first}")
        else:
            nxt = {"previous_response_id": first["id"], "input": "more", "max_output_tokens": 4}
            own, _ = request(server.port, "POST", "/v1/responses", nxt, key=KEYS[0])
            other, _ = request(server.port, "POST", "/v1/responses", nxt, key=KEYS[1])
            print(f"previous_response_id: own key {own}, other key {other}")
            if own != 200 or other != 404:
                failures.append(f"previous_response_id: own key {own} (want 200), other key {other} (want 404)")
        # The web page's memory view, polled while the bystander streams.
        for _ in range(20):
            status, _ = request(server.port, "GET", "/cache/tree")
            if status != 200:
                failures.append(f"/cache/tree answered {status}")
                break
        bystander.stop.set()
        bystander.join(timeout=BYSTANDER_BOUND_S * 4)
        failures += bystander.failures
        rss1 = rss_mib(server.proc.pid)
        worst = max(bystander.latencies) if bystander.latencies else 0.0
        print(f"bystander: {len(bystander.latencies)} requests, worst {worst:.2f} s (bound {BYSTANDER_BOUND_S} s)")
        print(f"server RSS: {rss0:.0f} MiB -> {rss1:.0f} MiB (bound +{RSS_BOUND_MIB} MiB)")
        if rss1 - rss0 > RSS_BOUND_MIB:
            failures.append(f"RSS grew by {rss1 - rss0:.0f} MiB (bound {RSS_BOUND_MIB} MiB)")
        if not bystander.latencies:
            failures.append("the bystander never finished a request")
        if server.proc.poll() is not None:
            failures.append("the server exited:\n" + server.tail())
    finally:
        server.stop()
    print(f"total {time.time() - t0:.1f} s")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("PASSED")


if __name__ == "__main__":
    main()
