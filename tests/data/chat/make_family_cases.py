#!/usr/bin/env python3
"""Writes family_cases.json: conversations rendered by Python's jinja2 (Hugging Face settings, see
make_jinja_cases.py) with the family templates written for rewind's tests (qwen3.jinja, qwq.jinja,
qwen3-coder.jinja: written from memory in the style of the published templates, not copies). rewind's
chat/templates_test.cc renders the same conversations and compares byte for byte.
Run: python3 make_family_cases.py > family_cases.json"""
import json
import sys

from make_jinja_cases import env

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"},
                                                          "days": {"type": "integer", "minimum": 1}},
                         "required": ["city"]}}}]
CONVS = {
    "plain": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
              {"role": "assistant", "content": "<think>\nGreet.\n</think>\n\nHello!"},
              {"role": "user", "content": "Bye"}],
    "tools": [{"role": "user", "content": "Weather in Oslo for 2 days?"},
              {"role": "assistant", "content": "Let me check.",
               "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                "arguments": {"city": "Oslo", "days": 2}}}]},
              {"role": "tool", "content": "{\"temp\": -3}"}, {"role": "tool", "content": "{\"temp\": -5}"},
              {"role": "assistant", "content": "Cold: -3 then -5."}, {"role": "user", "content": "Thanks"}],
}
out = []
for tmpl in ["qwen3.jinja", "qwq.jinja", "qwen3-coder.jinja", "qwen3.5.jinja"]:
    t = env.from_string(open(tmpl).read())
    for name, msgs in CONVS.items():
        for agp in [True, False]:
            kw = {"messages": msgs, "add_generation_prompt": agp}
            if name == "tools":
                kw["tools"] = TOOLS
            out.append({"template": tmpl, "conversation": name, "messages": msgs,
                        "tools": TOOLS if name == "tools" else None, "add_generation_prompt": agp,
                        "expected": t.render(**kw)})
json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
sys.stdout.write("\n")
