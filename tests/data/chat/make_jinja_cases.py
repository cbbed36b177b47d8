#!/usr/bin/env python3
"""Writes jinja_cases.json: small templates, one per construct, with the output of Python's jinja2 (3.x)
configured like Hugging Face's chat templates (trim_blocks, lstrip_blocks, tojson without escaping,
raise_exception). rewind's chat/jinja_test.cc renders each case and compares byte for byte.
Run: python3 make_jinja_cases.py > jinja_cases.json"""
import json
import sys

import jinja2
from jinja2.sandbox import SandboxedEnvironment


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

MSGS = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": "x"}}}]}]

CASES = [
    ("text_only", "plain text\n", {}),
    ("output_int_float_none_bool", "{{ 1 }} {{ 2.5 }} {{ 3.0 }} {{ none }} {{ true }} {{ 1e20 }} {{ 0.0001 }}", {}),
    ("string_escapes", "{{ 'a\\nb\\t\"c\\' \\u00e9 \\x41' }}|{{ \"it's\" }}", {}),
    ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 1.5 + 1 }}", {}),
    ("string_concat_and_tilde", "{{ 'a' + 'b' }} {{ 'n' ~ 1 ~ none }} {{ 'ab' * 3 }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ [1,2] == [1,2] }}", {}),
    ("logic", "{{ true and 'x' }} {{ false or 'y' }} {{ not 0 }} {{ '' or 'empty' }} {{ 0 and 1 }}", {}),
    ("in_not_in", "{{ 'b' in 'abc' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [3] }}", {}),
    ("ternary", "{{ 'yes' if x else 'no' }} {{ 'yes' if y else 'no' }} [{{ 'only' if y }}]", {"x": 1, "y": 0}),
    ("if_elif_else", "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in ['a','b','c'] %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {}),
    ("for_previtem_nextitem", "{% for x in [1,2,3] %}[{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}]{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for_tuple_unpacking", "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
    ("for_over_dict_keys", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
    ("for_filter_condition", "{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}", {}),
    ("loop_cycle", "{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("nested_loops_scoping", "{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %} {{ x }}", {}),
    ("namespace_assignment", "{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("set_tuple_and_block", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set blk %}inside {{ a }}{% endset %}[{{ blk }}]{% set up | upper %}shout{% endset %}{{ up }}", {}),
    ("macro_defaults_and_kwargs", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', greeting='Hi') }} {{ greet(name='Cy') }}", {}),
    ("macro_sees_globals", "{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", {"g": "global"}),
    ("macro_varargs_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{{ varargs|length }}{% endmacro %}{% call wrap('b', 1, 2) %}body{% endcall %}", {}),
    ("call_block_with_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1,2]) %}({{ x }}){% endcall %}", {}),
    ("filter_block", "{% filter upper %}shout {{ 'me' }}{% endfilter %}", {}),
    ("filters_strings", "{{ '  pad  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hello World'|lower }}|{{ 'hi'|upper }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aaa'|replace('a', 'b', 2) }}", {}),
    ("filters_length_first_last", "{{ [1,2,3]|length }} {{ 'héllo'|length }} {{ {'a':1}|count }} {{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ 'abc'|first }}", {}),
    ("filters_join_list_reverse", "{{ [1,2,3]|join(', ') }} {{ 'abc'|list }} {{ [1,2,3]|reverse|list }} {{ 'abc'|reverse }} {{ users|join('/', attribute='name') }}", {"users": [{"name": "a"}, {"name": "b"}]}),
    ("filters_default", "{{ missing|default('dflt') }} {{ ''|default('e', true) }} {{ 'set'|d('x') }} {{ none|default('n') }}", {}),
    ("filters_map_select", "{{ users|map(attribute='name')|join(',') }} {{ ['a','b']|map('upper')|list }} {{ range(6)|select('even')|list }} {{ range(6)|reject('odd')|list }} {{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|first }} {{ users|selectattr('name', 'equalto', 'b')|list|length }}", {"users": [{"name": "a", "admin": True}, {"name": "b", "admin": False}]}),
    ("filters_sort_unique_dictsort", "{{ [3,1,2]|sort }} {{ ['b','A','c']|sort }} {{ [3,1,2]|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='n')|join }} {{ [1,2,1,3]|unique|list }} {% for k, v in {'b': 1, 'a': 2}|dictsort %}{{ k }}{{ v }}{% endfor %}", {"users": [{"n": "x", "age": 3}, {"n": "y", "age": 1}]}),
    ("filters_numbers", "{{ '42'|int + 1 }} {{ 'x'|int }} {{ 3.7|int }} {{ '2.5'|float }} {{ -3|abs }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ [1,2,3]|sum }} {{ [3,1]|min }} {{ [3,1]|max }}", {}),
    ("filters_indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}", {}),
    ("filter_string_and_repr", "{{ [1, 'a', none, true]|string }} {{ {'k': 'v'} }} {{ 1|string + 'x' }}", {}),
    ("tojson_basic", "{{ d|tojson }}", {"d": {"b": 1, "a": [1, 2.5, "x\"y\\n\n", None, True], "c": {"u": "é✓"}}}),
    ("tojson_indent", "{{ d|tojson(indent=2) }}", {"d": {"b": 1, "a": [1, {"x": []}]}}),
    ("tests_types", "{{ 's' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ {} is mapping }} {{ [] is iterable }} {{ 's' is iterable }} {{ [] is sequence }} {{ none is none }} {{ true is boolean }} {{ x is defined }} {{ y is undefined }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ range is callable }}", {"x": 1}),
    ("tests_comparisons", "{{ 4 is divisibleby 2 }} {{ 3 is odd }} {{ 3 is even }} {{ 2 is eq 2 }} {{ 2 is ne 3 }} {{ 3 is gt 2 }} {{ 3 is lt 2 }} {{ 1 is in [1,2] }} {{ 2 is not in [1] }} {{ 'a' is sameas 'a' }}", {}),
    ("string_methods", "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  x '.strip() }}|{{ 'xxy'.lstrip('x') }}|{{ 'yxx'.rstrip('x') }}|{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'aXa'.replace('a', 'b') }} {{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ 'ab cd'.title() }} {{ 'hello'.find('l') }} {{ 'hello'.count('l') }} {{ '-'.join(['a','b']) }} {{ '{} and {}'.format(1, 'x') }}", {}),
    ("think_split_idiom", "{% set c = '<think>\\nreason\\n</think>\\n\\nanswer' %}{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[-1].lstrip('\\n') }}", {}),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }}", {"d": {"a": 1, "b": 2}}),
    ("list_methods_append", "{% set l = [] %}{% for i in range(3) %}{% set _ = l.append(i * 2) %}{% endfor %}{{ l }} {{ l.index(4) }} {{ l.count(0) }} {{ l.pop() }} {{ l }}", {}),
    ("slicing", "{{ l[::-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[::2] }} {{ l[-2] }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ l[10:] }} {{ 'héllo'[1] }}", {"l": [1, 2, 3, 4, 5]}),
    ("attribute_and_item_access", "{{ m.a.b }} {{ m['a']['b'] }} {{ m.missing }}|{{ m.missing is defined }} {{ l.0 }} {{ m.a.missing|default('d') }}", {"m": {"a": {"b": "deep"}}, "l": [9]}),
    ("whitespace_trim_blocks", "{% if true %}\nline\n{% endif %}\nend", {}),
    ("whitespace_lstrip_blocks", "start\n    {% if true %}\n    indented\n    {% endif %}\nend", {}),
    ("whitespace_minus_modifiers", "a  {{- ' b ' -}}  c\n  {%- if true -%}  d  {%- endif -%}\n  e {#- comment -#} f", {}),
    ("whitespace_plus_modifiers", "x\n    {%+ if true +%}\ny\n{% endif %}", {}),
    ("whitespace_var_not_trimmed", "{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("comments", "a{# a comment {{ not rendered }} #}b\n{# line comment #}\nc", {}),
    ("raw_block", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}", {}),
    ("chat_like_loop", "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% if m.tool_calls %}{% for tc in m.tool_calls %}[{{ tc.function.name }}:{{ tc.function.arguments|tojson }}]{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}", {"messages": MSGS, "add_generation_prompt": True}),
    ("undefined_prints_empty", "[{{ nothing }}][{{ nothing is defined }}]", {}),
    ("range_forms", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }}", {}),
    ("dict_literal_order", "{% set d = {'z': 1, 'a': 2} %}{{ d|tojson }} {% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}", {}),
    ("unicode_passthrough", "{{ s|upper }} {{ s|length }} {{ s[0] }}", {"s": "é世🦙"}),
]

ERRORS = [
    ("raise_exception_message", "{% if true %}{{ raise_exception('Custom failure: ' ~ 42) }}{% endif %}", {}, "Custom failure: 42"),
]

def main():
    out = []
    for name, tmpl, ctx in CASES:
        out.append({"name": name, "template": tmpl, "context": ctx, "expected": env.from_string(tmpl).render(**ctx)})
    for name, tmpl, ctx, msg in ERRORS:
        try:
            env.from_string(tmpl).render(**ctx)
            raise SystemExit("expected an error in " + name)
        except jinja2.exceptions.TemplateError as e:
            assert str(e) == msg, (name, str(e))
        out.append({"name": name, "template": tmpl, "context": ctx, "error": msg})
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
