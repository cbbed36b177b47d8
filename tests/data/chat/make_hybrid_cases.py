#!/usr/bin/env python3
"""Writes hybrid_cases.json: conversations rendered by Python's jinja2 with the published chat templates of
the hybrid model families (Nemotron Nano v2, Nemotron 3 Nano, Granite 4.0, LFM2; see README.md for where
the .jinja files come from). The environment is Hugging Face transformers' (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loop controls, tojson = json.dumps(ensure_ascii=False), raise_exception,
strftime_now), and the context is what rewind's RenderChat passes: messages, tools (None when empty),
add_generation_prompt, enable_thinking (default true), bos_token, eos_token, then chat_template_kwargs.
chat/chat_render_test.cc renders the same cases and compares byte for byte; a case where jinja2 raises
records "error": true; conversations are stored once, cases name them (rewind must return an error, not crash).
Run: python3 make_hybrid_cases.py > hybrid_cases.json"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from make_jinja_cases import raise_exception, tojson

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
# Kimi's template keeps its tool-call ids in a list (append, pop), which the immutable sandbox refuses; llama.cpp's
# renderer allows it, so rewind does, and its cases are rendered by the plain sandbox (mutation allowed).
mutable_env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
MUTABLE = {"kimi-k2.jinja"}
for e in (env, mutable_env):
    e.filters["tojson"] = tojson
    e.globals["raise_exception"] = raise_exception
    e.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather.\n  ",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": " City name "},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "hours": {"type": "array", "items": {"type": "integer"}}},
        "required": ["city"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                    "filters": {"type": "object", "properties": {}}},
                   "required": ["query"]}}}
TOOLS = [WEATHER, SEARCH]

LONG = ("First paragraph with \"quotes\", 'apostrophes', a backslash \\ and unicode: é, ✓, 日本語.\n\n"
        "```python\ndef f(x):\n    return {\"a\": x}\n```\n\n" + "Line of filler text. " * 12 + "\n\tTabbed end.  ")


def call(name, args, with_type=True):
    c = {"function": {"name": name, "arguments": args}}
    if with_type:
        c = {"id": "call_" + name, "type": "function", **c}
    return c


CONVS = {
    "system_multiturn": ([
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "<think>\nThe user greets.\n</think>\n\nHello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."}], None),
    "no_system": ([{"role": "user", "content": "What is 2+2?"}], None),
    "no_think_flag": ([
        {"role": "system", "content": "Answer directly. /no_think"},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Spain? /think"}], None),
    "reasoning_content": ([
        {"role": "user", "content": "Is 17 prime?"},
        {"role": "assistant", "reasoning_content": "Check divisors up to 4.", "content": "Yes, 17 is prime."},
        {"role": "user", "content": "And 21?"},
        {"role": "assistant", "reasoning_content": "21 = 3 * 7.", "content": "No: 21 = 3 x 7."}], None),
    "tool_call": ([
        {"role": "system", "content": "You help with weather."},
        {"role": "user", "content": "Weather in Oslo for 2 days?"},
        {"role": "assistant", "content": "Let me check.",
         "tool_calls": [call("get_weather", {"city": "Oslo", "days": 2, "hours": [9, 18]})]},
        {"role": "tool", "tool_call_id": "call_get_weather", "content": "{\"temp\": -3, \"sky\": \"snow\"}"},
        {"role": "assistant", "content": "Cold and snowy: -3 C."},
        {"role": "user", "content": "Thanks!"}], TOOLS),
    "parallel_calls": ([
        {"role": "user", "content": "Weather in Oslo and Rome, and search for flights."},
        {"role": "assistant", "content": "",
         "tool_calls": [call("get_weather", {"city": "Oslo"}), call("get_weather", {"city": "Rome", "unit": "celsius"}),
                        call("search", {"query": "flights Oslo Rome", "filters": {"max_price": 200, "direct": True}},
                             with_type=False)]},
        {"role": "tool", "content": "{\"temp\": -3}"},
        {"role": "tool", "content": "{\"temp\": 18}"},
        {"role": "tool", "content": "[\"SK4711 120 EUR\"]"}], TOOLS),
    "tools_no_system": ([{"role": "user", "content": "Search for cats"}], [SEARCH]),
    "tool_call_last": ([
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "<think>\nNeed the tool.\n</think>\n",
         "tool_calls": [call("get_weather", {"city": "Paris"})]}], TOOLS),
    "multipart": ([
        {"role": "system", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]},
        {"role": "user", "content": [{"type": "text", "text": "Describe"}, {"type": "text", "text": "this."}]},
        {"role": "assistant", "content": "It is a description."},
        {"role": "user", "content": [{"type": "text", "text": "More."}]}], None),
    "long_messages": ([
        {"role": "system", "content": LONG},
        {"role": "user", "content": LONG + "\nQuestion?"},
        {"role": "assistant", "content": "<think>\n" + LONG + "\n</think>\n\n" + LONG},
        {"role": "user", "content": "  padded  \n"}], None),
    "assistant_prefill": ([
        {"role": "user", "content": "Write a haiku."},
        {"role": "assistant", "content": "Autumn moonlight -"}], None),
}

TEMPLATES = ["nemotron-nano-v2.jinja", "nemotron-3-nano.jinja", "granite-4.0.jinja", "lfm2-8b-a1b.jinja",
             "kimi-k2.jinja"]
KWARGS = {  # extra chat_template_kwargs variants, per template
    "nemotron-3-nano.jinja": [{"enable_thinking": False}, {"truncate_history_thinking": False}],
    "granite-4.0.jinja": [{"documents": [{"doc_id": 1, "title": "Oslo", "text": "Oslo is cold."}]}],
    "nemotron-nano-v2.jinja": [{"continue_final_message": False}],
}


def render(tmpl, msgs, tools, agp, kwargs):
    ctx = {"messages": msgs, "tools": tools, "add_generation_prompt": agp, "enable_thinking": True,
           "bos_token": "<s>", "eos_token": "</s>"}
    ctx.update(kwargs)
    return (mutable_env if tmpl in MUTABLE else env).from_string(open(tmpl).read()).render(**ctx)


def main():
    out = []
    for tmpl in TEMPLATES:
        for name, (msgs, tools) in CONVS.items():
            variants = [] if name in ("long_messages", "multipart") else KWARGS.get(tmpl, [])
            for kwargs in [{}] + variants:
                for agp in [True, False]:
                    case = {"template": tmpl, "conversation": name, "add_generation_prompt": agp,
                            "kwargs": kwargs}
                    try:
                        case["expected"] = render(tmpl, msgs, tools, agp, kwargs)
                    except (jinja2.exceptions.TemplateError, TypeError, AttributeError):
                        case["error"] = True
                    out.append(case)
    convs = {name: {"messages": msgs, "tools": tools} for name, (msgs, tools) in CONVS.items()}
    json.dump({"conversations": convs, "cases": out}, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
