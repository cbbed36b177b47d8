#!/usr/bin/env python3
"""Bounded soak test of `rewind serve` (ctest soak_restart, label e2e; about a minute).

What a user who keeps one server running would hit, on the built-in demo model:
  1. reference: every prompt once against `--no-cache` (greedy text and logprobs);
  2. 8 concurrent clients against a server with a small disk tier (--cache-disk 4 MiB, so the store evicts):
     whole answers (streamed and not), streams dropped after a few events, requests abandoned before their
     answer (cancels); then kill -9 of the server while its writer has values queued;
  3. truncated and corrupted values, a stray value and an interrupted temporary file planted in the cache folder;
  4. a restart on that folder: each prompt once (the disk tier must serve some: cache report `... loaded from the
     disk tier`), then the 8 clients again, then SIGTERM (must exit 0);
  5. kill -9 right after each of a few answers (on a fresh folder): the restarted server must resume the next turn
     from the state the answer left, at the longest common prefix, read from disk (an answer is acknowledged only
     once its end state survives a crash: --cache-disk-wait).
Every request must be answered with the reference's output or cleanly refused (503 / 429 with an error body);
only requests in flight at the kill may fail. Stdlib only: python3 soak_test.py BUILD/rewind [WORKDIR]
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import rewind_http  # noqa: E402  (the shared helpers, found through the line above)

CLIENTS = 8
MAX_TOKENS = 12
SOAK_SECONDS = 14
SEED = int(os.environ.get("REWIND_SOAK_SEED", "20261201"))


def make_prompts():
    """3 conversations x 3 turns sharing a system prefix: later turns extend earlier ones, as chats do."""
    rng = random.Random(7)
    words = ("harbour lamp boat letter compass north light keeper town market bread violin square pier stone "
             "water morning mayor notebook apples children pigeons fountain canvas brass cape ships coast").split()

    def text(n):
        return " ".join(rng.choice(words) for _ in range(n))

    system = "System: you answer questions about the harbour. " + text(90) + "\n"
    prompts = []
    for c in range(3):
        conv = system + f"Conversation {c}: " + text(40)
        for turn in range(3):
            conv += f"\nUser turn {turn}: " + text(35 + 10 * turn) + "\nAssistant:"
            prompts.append(conv)
    return prompts


class Server:
    def __init__(self, binary, args, log_path):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        start = self.log.tell()  # one log for every server of the test: this one's lines start here
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.time() + 120
        while self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.tail()}")
            if time.time() > deadline:
                raise RuntimeError("server did not start:\n" + self.tail())
            with open(log_path, "rb") as f:
                f.seek(start)
                m = re.search(rb"listening on http://[\d.]+:(\d+)", f.read())
            if m:
                self.port = int(m.group(1))
            time.sleep(0.05)
        while True:  # 503 while loading
            try:
                status, _ = request(self.port, "GET", "/health")
                if status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("model did not load:\n" + self.tail())
            time.sleep(0.05)

    def tail(self, n=40):
        return "\n".join(open(self.log_path, errors="replace").read().splitlines()[-n:])

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "hung on SIGTERM"


def request(port, method, path, body=None, timeout=60):
    return rewind_http.request(port, method, path, body, timeout=timeout)


def completion_body(prompt, stream=False):
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": stream}
    if not stream:
        body["logprobs"] = 1
    return body


def answer_of(j):
    choice = j["choices"][0]
    return choice["text"], choice["logprobs"]["token_logprobs"]


class Soak:
    """Clients that pick a prompt and an action at random until told to stop, counting what they saw."""

    def __init__(self, port, prompts, reference, seed):
        self.port, self.prompts, self.reference = port, prompts, reference
        self.rng_seed = seed
        self.stop = threading.Event()
        self.killed = threading.Event()  # set just before a kill -9: errors after it are expected
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []

    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def fail(self, what):
        with self.lock:
            self.failures.append(what)

    def refused(self, status, body):
        if status in (429, 503) and isinstance(body, dict) and "error" in body:
            self.count("refused")
            return True
        return False

    def whole(self, i):
        status, body = request(self.port, "POST", "/v1/completions", completion_body(self.prompts[i]))
        if self.refused(status, body):
            return
        if status != 200:
            return self.fail(f"prompt {i}: HTTP {status}: {str(body)[:300]}")
        if answer_of(body) != self.reference[i]:
            return self.fail(f"prompt {i}: {answer_of(body)} != --no-cache {self.reference[i]} "
                             f"(cache {body.get('cache')})")
        self.count("answered")

    def stream(self, i, drop_after=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(completion_body(self.prompts[i], True)),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                body = r.read()
                try:
                    body = json.loads(body)
                except ValueError:
                    pass
                if not self.refused(r.status, body):
                    self.fail(f"stream {i}: HTTP {r.status}: {str(body)[:300]}")
                return
            text, events, done = "", 0, False
            while True:
                line = r.fp.readline()
                if not line:
                    break
                line = line.decode().strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                event = json.loads(line[6:])
                if "error" in event:
                    return self.fail(f"stream {i}: error event {event}")
                text += event["choices"][0].get("text", "")
                events += 1
                if drop_after is not None and events >= drop_after:
                    self.count("dropped mid-stream")
                    return  # the connection closes here: the server must cancel the request
            if not done and self.killed.is_set():
                return self.count("cut by the kill")
            if not done:
                return self.fail(f"stream {i}: ended without [DONE] after {events} events")
            if text != self.reference[i][0]:
                return self.fail(f"stream {i}: {text!r} != --no-cache {self.reference[i][0]!r}")
            self.count("streamed")
        finally:
            conn.close()

    def abandon(self, i):
        """Sends a request and hangs up before its answer (a client-side cancel)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=0.02)
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(completion_body(self.prompts[i])),
                         headers={"Content-Type": "application/json"})
            conn.getresponse().read()
            self.count("answered before the cancel")
        except (TimeoutError, OSError):
            self.count("cancelled")
        finally:
            conn.close()

    def client(self, k):
        rng = random.Random(self.rng_seed * 100 + k)
        while not self.stop.is_set():
            i = rng.randrange(len(self.prompts))
            action = rng.random()
            try:
                if action < 0.4:
                    self.whole(i)
                elif action < 0.6:
                    self.stream(i)
                elif action < 0.8:
                    self.stream(i, drop_after=rng.randint(1, 4))
                else:
                    self.abandon(i)
            except (OSError, http.client.HTTPException, ValueError) as e:
                if self.killed.is_set():
                    self.count("cut by the kill")
                    return
                self.fail(f"prompt {i}: {type(e).__name__}: {e}")

    def run(self, seconds, kill=None):
        threads = [threading.Thread(target=self.client, args=(k,)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        if kill is not None:
            kill(self)
        else:
            time.sleep(seconds)
        self.stop.set()
        for t in threads:
            t.join(timeout=120)
            if t.is_alive():
                self.fail("a client hung (no answer within 120 s)")


def kill_while_persisting(server, deadline_s):
    """kill -9 as soon as GET /cache shows values queued for the disk (or at the deadline)."""

    def kill(soak):
        end = time.time() + deadline_s
        seen = False
        time.sleep(deadline_s * 2 / 3)  # let some states reach the disk first
        while time.time() < end:
            try:
                status, c = request(server.port, "GET", "/cache", timeout=5)
                if status == 200 and c.get("disk_queued_bytes", 0) > 0:
                    seen = True
                    break
            except OSError:
                pass
            time.sleep(0.005)
        soak.killed.set()
        server.kill9()
        print(f"kill -9 {'with ' + str(c['disk_queued_bytes']) + ' bytes queued' if seen else 'at the deadline'}")

    return kill


def plant_damage(cache_dir, rng):
    """Damages values of the store the killed server left: returns what was done."""
    files = []
    for root, _, names in os.walk(cache_dir):
        for n in names:
            files.append(os.path.join(root, n))
    states = sorted((f for f in files if os.path.basename(f).startswith("s-")),
                    key=lambda f: int(os.path.basename(f).split("-")[1]))
    pages = sorted((f for f in files if os.path.basename(f).startswith("p-")),
                   key=lambda f: int(os.path.basename(f).split("-")[1]))
    done = []
    # The shortest state and the pages of its prefix stay intact, so the restart has something to serve.
    victims = states[1:]
    rng.shuffle(victims)
    if len(victims) >= 1:
        size = os.path.getsize(victims[0])
        with open(victims[0], "r+b") as f:
            f.truncate(size // 2)
        done.append(f"truncated {os.path.basename(victims[0])}")
    if len(victims) >= 2:
        with open(victims[1], "r+b") as f:
            f.seek(os.path.getsize(victims[1]) // 2)
            b = f.read(16)
            f.seek(-len(b), os.SEEK_CUR)
            f.write(bytes(x ^ 0x5A for x in b))
        done.append(f"flipped bytes in {os.path.basename(victims[1])}")
    if states and pages and int(os.path.basename(pages[-1]).split("-")[1]) > int(
            os.path.basename(states[0]).split("-")[1]):
        with open(pages[-1], "r+b") as f:
            f.truncate(7)
        done.append(f"truncated {os.path.basename(pages[-1])} to 7 bytes")
    os.makedirs(os.path.join(cache_dir, "ff"), exist_ok=True)
    with open(os.path.join(cache_dir, "ff", "s-64-00000000000000ff"), "wb") as f:
        f.write(os.urandom(4096))  # a value no index names
    with open(os.path.join(cache_dir, "ff", "s-96-00000000000001ff.tmp"), "wb") as f:
        f.write(os.urandom(100))  # an interrupted atomic write
    done.append("planted a stray value and a torn temporary file")
    return f"{len(states)} states, {len(pages)} pages on disk; " + "; ".join(done)


def crash_right_after_answers(binary, args, log, failures):
    """Phase 5: each turn's answer, then kill -9 at once, a restart, and the next turn of that conversation."""
    rng = random.Random(SEED + 5)
    words = "harbour lamp boat letter compass north light keeper town market bread violin".split()
    server = Server(binary, args, log)
    try:
        for turn in range(3):
            prompt = f"Story {turn}: " + " ".join(rng.choice(words) for _ in range(250))  # no prefix in common
            status, j = request(server.port, "POST", "/v1/completions", completion_body(prompt))
            server.kill9()  # right after the answer
            server = Server(binary, args, log)
            if status != 200:
                failures.append(f"crash phase, turn {turn}: HTTP {status}: {j}")
                continue
            status, j = request(server.port, "POST", "/v1/completions",
                                completion_body(prompt + answer_of(j)[0] + " and then"))
            c = j.get("cache", {}) if status == 200 else {}
            print(f"crash phase, turn {turn}: resumed at {c.get('resume_pos')} (LCP {c.get('lcp')}): {c.get('reason')}")
            if status != 200 or c["resume_pos"] != c["lcp"] or "disk tier" not in c["reason"]:
                failures.append(f"crash phase, turn {turn}: the next turn after kill -9 did not resume from the "
                                f"answer's state on disk: HTTP {status}: {c or j}")
    finally:
        server.stop()


def main():
    binary = os.path.abspath(sys.argv[1])
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="rewind-soak-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cache_dir = os.path.join(work, "cache")
    log = os.path.join(work, "server.log")
    model = subprocess.run([binary, "make-model", "--demo", "f32", "-q"], check=True, capture_output=True,
                           text=True).stdout.strip().splitlines()[-1]
    common = ["-m", model, "--parallel", "4", "-t", "2", "-c", "2048"]
    prompts = make_prompts()
    rng = random.Random(SEED)
    failures = []
    t0 = time.time()

    ref_server = Server(binary, common + ["--no-cache"], log)
    reference = []
    for p in prompts:
        status, j = request(ref_server.port, "POST", "/v1/completions", completion_body(p))
        if status != 200:
            raise RuntimeError(f"--no-cache reference failed: {status} {j}")
        reference.append(answer_of(j))
    ref_server.stop()
    print(f"reference: {len(prompts)} prompts ({time.time() - t0:.1f} s)")

    cached = common + ["--cache-dir", cache_dir, "--cache-disk", "4"]
    server = Server(binary, cached, log)
    soak = Soak(server.port, prompts, reference, SEED)
    soak.run(SOAK_SECONDS, kill=kill_while_persisting(server, SOAK_SECONDS))
    print(f"phase 1 (then kill -9): {soak.counts} ({time.time() - t0:.1f} s)")
    failures += [f"phase 1: {f}" for f in soak.failures]

    print("planted:", plant_damage(cache_dir, rng))

    server = Server(binary, cached, log)
    from_disk = 0
    for i, p in enumerate(prompts):
        status, j = request(server.port, "POST", "/v1/completions", completion_body(p))
        if status != 200:
            failures.append(f"restart, prompt {i}: HTTP {status}: {j}")
            continue
        if answer_of(j) != reference[i]:
            failures.append(f"restart, prompt {i}: {answer_of(j)} != --no-cache {reference[i]} ({j.get('cache')})")
        if "disk tier" in j["cache"]["reason"] and j["cache"]["resume_pos"] > 0:
            from_disk += 1
    status, c = request(server.port, "GET", "/cache")
    print(f"restart: {from_disk} of {len(prompts)} prompts resumed from the disk tier; "
          f"disk_files_loaded {c.get('disk_files_loaded')}, disk_states {c.get('disk_states')}, "
          f"disk_bytes {c.get('disk_bytes')}, "
          f"disk_write_errors {c.get('disk_write_errors')}")
    if from_disk == 0:
        failures.append("the restarted server served nothing from its disk cache")
    if c.get("disk_bytes", 0) > 4 << 20:
        failures.append(f"the disk tier holds {c.get('disk_bytes')} bytes, over --cache-disk 4 (MiB)")
    if c.get("disk_write_errors"):
        failures.append(f"disk write errors: {c.get('disk_write_errors')}")

    skipped = len(re.findall(r"(?m)^\S+ W cache: disk tier: .* skipped", open(log, errors="replace").read()))
    print(f"restart: {skipped} damaged values found and skipped (those the prompts reached)")

    soak = Soak(server.port, prompts, reference, SEED + 1)
    soak.run(SOAK_SECONDS * 2 // 3)
    print(f"phase 2: {soak.counts} ({time.time() - t0:.1f} s)")
    failures += [f"phase 2: {f}" for f in soak.failures]
    if soak.counts.get("answered", 0) + soak.counts.get("streamed", 0) == 0:
        failures.append("phase 2 answered nothing")
    code = server.stop()
    if code != 0:
        failures.append(f"SIGTERM: exit {code}")

    # A generous bound: this checks that an answer waits for its end state, not how fast the disk is.
    crash_right_after_answers(binary, common + ["--cache-dir", os.path.join(work, "crash-cache"),
                                                "--cache-disk-wait", "60000"], log, failures)
    if re.search(r"(?m)^\S+ [EF] |Assertion|Sanitizer|terminate called", open(log, errors="replace").read()):
        failures.append("the server log has errors:\n" + "\n".join(
            l for l in open(log, errors="replace").read().splitlines() if re.match(r"\S+ [EF] ", l))[:2000])

    if failures:
        print(f"FAILED ({len(failures)}), server log {log}:")
        for f in failures[:20]:
            print("  " + f)
        print(server.tail())
        return 1
    print(f"PASS in {time.time() - t0:.1f} s")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
