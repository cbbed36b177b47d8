#!/usr/bin/env python3
"""The llama.cpp issue 26994 scenario against an OpenAI-compatible server (rewind serve or llama-server, both
started with --mmproj): one image, then five different questions about it (separate requests, each with the
image), then a two-turn conversation about it. Prints, per request, the prompt tokens and the prompt tokens the
server processed (timings.prompt_n, which both servers report), so that runs of the two servers compare side by
side (docs/images.md, "Measured").

  scripts/image-scenario.py --url http://127.0.0.1:8080 --image tests/data/golden_images/tall-64x160.png
"""
import argparse
import base64
import json
import time
import urllib.request


def chat(url, messages, max_tokens):
    t0 = time.monotonic()
    body = json.dumps({"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 0,
                       "cache_prompt": True}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    out["_wall_ms"] = (time.monotonic() - t0) * 1000.0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--image", required=True)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    mime = "image/png" if a.image.endswith(".png") else "image/jpeg"
    data = base64.b64encode(open(a.image, "rb").read()).decode()
    image = {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    questions = ["What is in this picture?", "What colours dominate it?", "Is there any text in it?",
                 "Describe the top left corner.", "How many distinct shapes can you see?"]
    rows = []

    def record(name, r):
        t = r.get("timings", {})
        u = r.get("usage", {})
        rows.append((name, u.get("prompt_tokens"), t.get("prompt_n"), r["_wall_ms"]))
        return r["choices"][0]["message"].get("content") or ""

    for i, q in enumerate(questions):
        record(f"question {i + 1}", chat(a.url, [{"role": "user", "content": [image, {"type": "text", "text": q}]}],
                                         a.max_tokens))
    turn1 = [{"role": "user", "content": [image, {"type": "text", "text": "Describe this image briefly."}]}]
    answer = record("chat turn 1", chat(a.url, turn1, a.max_tokens))
    turn2 = turn1 + [{"role": "assistant", "content": answer},
                     {"role": "user", "content": "And what would you change about it?"}]
    record("chat turn 2", chat(a.url, turn2, a.max_tokens))
    print(f"{a.label:12s} {'request':14s} {'prompt':>7s} {'processed':>9s} {'wall_ms':>8s}")
    for name, p, n, ms in rows:
        print(f"{a.label:12s} {name:14s} {p!s:>7s} {n!s:>9s} {ms:8.0f}")


if __name__ == "__main__":
    main()
