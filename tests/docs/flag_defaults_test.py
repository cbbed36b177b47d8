#!/usr/bin/env python3
"""Every flag default the user docs state equals what `rewind COMMAND --help` prints (ctest docs_flag_defaults).

Usage: flag_defaults_test.py BUILD/rewind REPO_DIR. Reads docs/*.md and README.md. Stdlib only.

The conventions it reads (the docs follow them; a doc that breaks one fails with its file and line):
- Flag tables: a table whose header has a `flag` column (or "`rewind CMD` flag") and a `default` column. The
  command is the one in that header cell, else the file's title (`# rewind CMD`). The flag cell names one or
  more flags, each in its own backticks with its spellings (`-m, --model`, `--remote-cache URL`: words without a
  leading `-` are placeholders). The default cell holds one value for all of them, or one per flag separated by
  commas; each value is written as `--help` prints it (numbers, words; `on` / `off` for switches, which always
  mean the positive flag even when the row names `--no-X`; `none` or `""` for an empty value), optionally
  followed by a note in parentheses: `none (the demo model)`. An empty default cell states no default.
- Other tables with a `default` or `default (flag)` column (request fields): a default that comes from a flag of
  `rewind serve` is written `VALUE (`--flag`)` or `V1, V2 (`--f1`, `--f2`)`; values written as JSON arrays or
  objects are the request's spelling and are not compared.
- Prose: "`--flag ARG` (default VALUE" states a default too.
Every flag named in those places must exist in its command. `--help` itself must not list a spelling twice.
"""
import os
import re
import subprocess
import sys


def run_help(binary, *args):
    return subprocess.run([binary, *args, "--help"], capture_output=True, text=True, check=False).stdout


def commands(binary):
    out, names, on = run_help(binary), [], False
    for line in out.splitlines():
        if line.startswith("commands:"):
            on = True
        elif on and line.startswith("  ") and line.strip():
            names.append(line.split()[0])
        elif on and not line.strip() and names:
            break
    return names


class Flags:
    """One command's flags from its --help: spelling -> (canonical name, default text, is_bool)."""

    def __init__(self, text):
        self.by_spelling, self.duplicates = {}, []
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"^  (-\S.*?)( \[?VALUE\]?)?$", line)
            if not m or line.startswith("      "):
                continue
            spellings = [s.strip() for s in m.group(1).split(",")]
            help_text = ""
            for nxt in lines[i + 1:]:
                if not nxt.startswith("      "):
                    break
                help_text += nxt.strip() + " "
            d = re.search(r"\(default: (.*)\)\s*$", help_text)
            if not d:
                continue  # -h, --help
            entry = (spellings[0], d.group(1), m.group(2) is None)
            for s in spellings:
                if s in self.by_spelling:
                    self.duplicates.append(s)
                self.by_spelling[s] = entry

    def lookup(self, spelling):
        """(name, default, is_bool, negated) or None; --no-X finds the switch X."""
        if spelling in self.by_spelling:
            return (*self.by_spelling[spelling], False)
        if spelling.startswith("--no-"):
            e = self.by_spelling.get("--" + spelling[5:])
            if e and e[2]:
                return (*e, True)
        return None


def split_top(text, sep=","):
    """Splits at `sep` outside backticks, parentheses and brackets."""
    parts, depth, tick, cur = [], 0, False, ""
    for ch in text:
        if ch == "`":
            tick = not tick
        elif not tick and ch in "([{":
            depth += 1
        elif not tick and ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0 and not tick:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def value_of(cell):
    """A default as written, without its note in parentheses and without backticks."""
    v = re.sub(r"\s*\(.*\)\s*$", "", cell.strip()).strip()
    return v.replace("`", "").strip()


def same(doc, code, is_bool):
    if is_bool:
        return {"on": "true", "true": "true", "off": "false", "false": "false"}.get(doc) == code
    if code == "none":
        return doc in ("none", '""')
    try:
        return float(doc) == float(code)
    except ValueError:
        return doc == code


def table_rows(lines, start):
    """Cells of the rows of the table whose header is lines[start]; yields (line number, cells)."""
    for j in range(start + 2, len(lines)):
        if not lines[j].startswith("|"):
            return
        yield j + 1, [c.strip() for c in split_top(lines[j].strip().strip("|"), "|")]


def check_file(path, flags, errors, checked):
    lines = open(path, encoding="utf-8").read().splitlines()
    title = re.match(r"# rewind (\S+)", lines[0]) if lines else None
    name = os.path.relpath(path)

    def check(where, cmd, spelling, doc_value):
        if cmd not in flags:
            return errors.append(f"{where}: no command '{cmd}'")
        found = flags[cmd].lookup(spelling)
        if found is None:
            return errors.append(f"{where}: rewind {cmd} has no flag {spelling}")
        flag, default, is_bool, _ = found
        if doc_value is None:
            return
        checked.append((cmd, flag))
        if not same(doc_value, default, is_bool):
            errors.append(f"{where}: {spelling} default is '{doc_value}' here, `rewind {cmd} --help` says "
                          f"'{default}'")

    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[i + 1]):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
            flag_col = next((k for k, c in enumerate(header) if re.fullmatch(r"(`rewind \S+` )?flag", c)), None)
            if flag_col is not None and "default" in header:
                m = re.match(r"`rewind (\S+)`", header[flag_col])
                cmd = m.group(1) if m else (title.group(1) if title else None)
                if cmd is None:
                    errors.append(f"{name}:{i + 1}: flag table without a command (header or `# rewind CMD`)")
                    continue
                dcol = header.index("default")
                for lineno, cells in table_rows(lines, i):
                    where = f"{name}:{lineno}"
                    groups = [[t for t in re.split(r"[ ,]+", g) if t.startswith("-")]
                              for g in re.findall(r"`([^`]*)`", cells[flag_col])]
                    groups = [g for g in groups if g]
                    values = split_top(cells[dcol]) if cells[dcol] else []
                    if values and len(values) not in (1, len(groups)):
                        errors.append(f"{where}: {len(values)} defaults for {len(groups)} flags")
                        continue
                    for k, g in enumerate(groups):
                        v = value_of(values[0] if len(values) == 1 else values[k]) if values else None
                        for spelling in g:
                            check(where, cmd, spelling, v)
            elif "default (flag)" in header or "default" in header:
                dcol = header.index("default (flag)" if "default (flag)" in header else "default")
                for lineno, cells in table_rows(lines, i):
                    cell = cells[dcol]
                    m = re.match(r"^(.*?)\s*\(((?:`-[^`]+`(?:, )?)+)\)$", cell)
                    if not cell or not m:
                        if "`-" in cell:
                            errors.append(f"{name}:{lineno}: write the default as VALUE (`--flag`): {cell}")
                        continue
                    values, spellings = split_top(m.group(1)), re.findall(r"`(-[^`]+)`", m.group(2))
                    if len(values) not in (1, len(spellings)):
                        errors.append(f"{name}:{lineno}: {len(values)} defaults for {len(spellings)} flags")
                        continue
                    for k, s in enumerate(spellings):
                        v = value_of(values[0] if len(values) == 1 else values[k])
                        check(f"{name}:{lineno}", "serve", s, None if v[:1] in "[{" else v)
        for m in re.finditer(r"`(--[a-z0-9-]+)[^`]*` \(default ([^;),]+)", line):
            cmd = title.group(1) if title else "serve"
            check(f"{name}:{i + 1}", cmd, m.group(1), value_of(m.group(2)))


def main():
    binary, repo = sys.argv[1], sys.argv[2]
    names = commands(binary)
    if len(names) < 5:
        print(f"could not read the commands from `{binary} --help`: {names}")
        return 1
    flags, errors, checked = {}, [], []
    for cmd in names:
        flags[cmd] = Flags(run_help(binary, cmd))
        if not flags[cmd].by_spelling:
            errors.append(f"`rewind {cmd} --help` lists no flags")
        for d in flags[cmd].duplicates:
            errors.append(f"`rewind {cmd} --help` lists {d} twice")
    docs = os.path.join(repo, "docs")
    paths = [os.path.join(docs, f) for f in sorted(os.listdir(docs)) if f.endswith(".md")]
    for path in paths + [os.path.join(repo, "README.md")]:
        check_file(path, flags, errors, checked)
    for e in errors:
        print(e)
    print(f"{len(set(checked))} flag defaults stated in the docs checked against --help of {len(names)} commands; "
          f"{len(errors)} mismatches")
    if len(set(checked)) < 40:
        print("too few defaults found: did the tables' format change?")
        return 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
