#!/usr/bin/env python3
"""Agent-shaped traces (format rewind-trace/1, ../shared/bench/TRACES.md) with long multi-part messages, to measure
where checkpoints sit when agents diverge (docs/checkpoints.md). Independent of the public traces' generator.

Scenarios:
  parts-reminder  a coding agent whose user messages are [long context part, short question part]; every other
                  turn the client rewrites the short part of its first user message (a status line it keeps
                  current), so the prompt diverges at a content-part boundary far back in the history.
  tool-results    tool loops whose results are long multi-part messages (a header part, then the output); the
                  client later prunes old tool results to a short placeholder part (diverges at the part).
  long-plain      long user messages without any structure (one paragraph, no parts), appended turn by turn,
                  with a regenerate now and then (diverges at the prompt's end).
  edit-plain      a long unstructured message (one paragraph, one part) whose last words the client rewrites
                  every other turn: it diverges inside the message, where only the regular spacing helps.

Usage: make-agent-traces.py OUT_DIR [--seed N] [--scale F]
"""
import argparse, json, os, random

WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud field engine "
         "socket buffer vector matrix kernel thread queue index commit branch module import export return yield "
         "parser lexer token window budget memory latency session render schema record column filter report").split()


def prose(rng, n, paragraphs=True):
    out = []
    for i in range(n):
        w = rng.choice(WORDS)
        out.append(w.capitalize() if i == 0 or out[-1].endswith(".") else w)
        if rng.random() < 0.08:
            out[-1] += "."
        if paragraphs and rng.random() < 0.01:
            out[-1] += "\n\n"
    return " ".join(out).replace("\n\n ", "\n\n") + "."


def code(rng, lines):
    return "\n".join(f"{'    ' * rng.randint(0, 3)}{rng.choice(WORDS)}_{rng.randint(0, 99)} = "
                     f"{rng.choice(WORDS)}({rng.randint(0, 4096)})" for _ in range(lines))


def parts(*texts):
    return [{"type": "text", "text": t} for t in texts]


def tools(rng, n):
    return [{"type": "function", "function": {"name": f"{rng.choice(WORDS)}_{i}", "description": prose(rng, 40),
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
            for i in range(n)]


def assistant(rng, words, reasoning=0, call=None):
    m = {"role": "assistant", "content": prose(rng, words) if words else ""}
    if reasoning:
        m["reasoning_content"] = prose(rng, reasoning)
    if call:
        m["tool_calls"] = [{"type": "function", "function": call}]
    return m


def req(session, append, **kw):
    r = {"session": session, "append": append, "max_tokens": kw.pop("max_tokens", 12)}
    r.update(kw)
    return r


def parts_reminder(rng, scale):
    s, out = "parts", []
    ctx = prose(rng, int(700 * scale))
    def first_user(i):
        return {"role": "user", "content": parts(ctx, f"Status {i}: " + prose(rng, 12, False))}
    out.append(req(s, [{"role": "system", "content": prose(rng, int(1200 * scale))}, first_user(0)],
                   tools=tools(rng, 6)))
    for i in range(1, int(10 * scale) or 3):
        msg = {"role": "user", "content": parts(prose(rng, rng.randint(200, 600)), prose(rng, rng.randint(10, 40)))}
        r = req(s, [assistant(rng, rng.randint(40, 160), rng.randint(40, 200)), msg])
        if i % 2 == 0:
            r["replace"] = [{"index": 1, "message": first_user(i)}]
        out.append(r)
    return out


def tool_results(rng, scale):
    s, out = "toolres", []
    out.append(req(s, [{"role": "system", "content": prose(rng, int(1500 * scale))},
                       {"role": "user", "content": prose(rng, 80)}], tools=tools(rng, 8)))
    results = []
    for i in range(int(12 * scale) or 3):
        call = {"name": "read_0", "arguments": {"path": f"src/{rng.choice(WORDS)}.py"}}
        result = {"role": "tool", "content": parts(f"Output of read_0 #{i}:", code(rng, rng.randint(40, 160)))}
        r = req(s, [assistant(rng, rng.randint(0, 30), rng.randint(30, 150), call), result])
        results.append(i)
        if i >= 4 and i % 4 == 0:  # prune the oldest results still in full to a placeholder part
            base = 2  # system, user, then (assistant, tool) pairs
            r["replace"] = [{"index": base + 2 * k + 1,
                             "message": {"role": "tool", "content": parts(f"Output of read_0 #{k}:", "[pruned]")}}
                            for k in range(i - 4, i - 2)]
        out.append(r)
    return out


def long_plain(rng, scale):
    s, out = "plain", []
    out.append(req(s, [{"role": "system", "content": prose(rng, int(400 * scale))},
                       {"role": "user", "content": prose(rng, int(1500 * scale), False)}]))
    for i in range(int(8 * scale) or 3):
        if i % 3 == 2:
            out.append(req(s, []))  # regenerate
            continue
        out.append(req(s, [assistant(rng, rng.randint(60, 200), rng.randint(40, 120)),
                           {"role": "user", "content": prose(rng, rng.randint(300, 1500), False)}]))
    return out


def edit_plain(rng, scale):
    s, out = "edit", []
    body = prose(rng, int(900 * scale), False)
    def note(i):
        return {"role": "user", "content": body + f" Last words, version {i}: " + prose(rng, 6, False)}
    out.append(req(s, [{"role": "system", "content": prose(rng, int(600 * scale))}, note(0)]))
    for i in range(1, int(8 * scale) or 3):
        r = req(s, [assistant(rng, rng.randint(60, 200), rng.randint(40, 120)),
                    {"role": "user", "content": prose(rng, rng.randint(200, 800), False)}])
        if i % 2 == 0:
            r["replace"] = [{"index": 1, "message": note(i)}]
        out.append(r)
    return out


SCENARIOS = {"parts-reminder": parts_reminder, "tool-results": tool_results, "long-plain": long_plain,
             "edit-plain": edit_plain}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name, fn in SCENARIOS.items():
        rng = random.Random(f"{a.seed}:{name}")
        trace = {"format": "rewind-trace/1", "name": name, "seed": a.seed, "scale": a.scale,
                 "description": fn.__doc__ or name, "requests": fn(rng, a.scale)}
        with open(os.path.join(a.out_dir, name + ".json"), "w") as f:
            json.dump(trace, f)


if __name__ == "__main__":
    main()
