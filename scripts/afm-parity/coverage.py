#!/usr/bin/env python3
"""The coverage map of AFM's own harness: every assertion of
`Scripts/test-assertions.sh` (scouzi1966/maclocal-api) against the afm-test
case that checks the same thing, or the reason it does not apply.

    coverage.py AFM_CHECKOUT|test-assertions.sh [--source LABEL] [--check]

Reads the assertions from AFM_CHECKOUT/Scripts/test-assertions.sh (each
distinct `run_test "GROUP" "NAME"` under its `# Section N:` heading),
merges them into fixtures/afm-parity/coverage.toml (entries kept; a new
assertion comes in unmapped; one AFM removed is dropped) and writes
docs/afm-parity.md. With --check it exits 1 while any is unmapped.
Without a checkout, `coverage.py --from-map` rewrites the page from the
map alone. afm-test's own test (`afm_parity_map`) checks that every case
named exists.
"""
import os
import re
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAP = os.path.join(ROOT, "fixtures", "afm-parity", "coverage.toml")
PAGE = os.path.join(ROOT, "docs", "afm-parity.md")


def assertions(script):
    section, seen = None, {}
    for line in open(script, encoding="utf-8"):
        m = re.match(r"^# Section ([0-9A-Za-z]+):", line)
        if m:
            section = m.group(1)
            continue
        for m in re.finditer(r'run_test\s+"([^"]*)"\s+"([^"]*)"', line):
            seen.setdefault((section, m.group(1), m.group(2)), None)
    return list(seen)


def quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_map(entries, source):
    out = ["# AFM's test-assertions.sh, assertion by assertion, against afm-test.",
           "# Written by scripts/afm-parity/coverage.py; edit cases and reasons here.",
           f"source = {quote(source)}", ""]
    for e in entries:
        out.append("[[assertion]]")
        out.append(f"section = {quote(e['section'])}")
        out.append(f"group = {quote(e['group'])}")
        out.append(f"name = {quote(e['name'])}")
        if e.get("cases"):
            out.append("cases = [" + ", ".join(quote(c) for c in e["cases"]) + "]")
        if e.get("not_applicable"):
            out.append(f"not_applicable = {quote(e['not_applicable'])}")
        out.append("")
    open(MAP, "w", encoding="utf-8").write("\n".join(out))


def write_page(entries, source):
    mapped = [e for e in entries if e.get("cases")]
    na = [e for e in entries if e.get("not_applicable")]
    open_ = [e for e in entries if not e.get("cases") and not e.get("not_applicable")]
    lines = [
        "# AFM's harness against afm-test",
        "",
        f"Every assertion of AFM's `Scripts/test-assertions.sh` ({source}), with the",
        "afm-test case that checks the same thing, or why it does not apply.",
        "Written by `scripts/afm-parity/coverage.py` from",
        "`fixtures/afm-parity/coverage.toml`.",
        "",
        f"{len(entries)} assertions: {len(mapped)} covered, {len(na)} not applicable, "
        f"{len(open_)} not covered yet.",
        "",
        "| section | group | assertion | afm-test |",
        "|---|---|---|---|",
    ]
    for e in entries:
        if e.get("cases"):
            cell = ", ".join(f"`{c}`" for c in e["cases"])
        elif e.get("not_applicable"):
            cell = "n/a: " + e["not_applicable"]
        else:
            cell = "**not covered yet**"
        name = e["name"].replace("|", "/")
        lines.append(f"| {e['section']} | {e['group']} | {name} | {cell} |")
    open(PAGE, "w", encoding="utf-8").write("\n".join(lines) + "\n")
    return open_


def main(argv):
    current = tomllib.load(open(MAP, "rb")) if os.path.exists(MAP) else {"assertion": []}
    known = {(e["section"], e["group"], e["name"]): e for e in current.get("assertion", [])}
    source = current.get("source", "")
    if argv and argv[0] != "--from-map":
        given = argv[0]
        script = given if os.path.isfile(given) else os.path.join(given, "Scripts", "test-assertions.sh")
        if "--source" in argv:
            source = argv[argv.index("--source") + 1]
        else:
            commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(script)),
                                     "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()
            source = f"scouzi1966/maclocal-api at {commit}" if commit else "scouzi1966/maclocal-api"
        entries = []
        for key in assertions(script):
            e = dict(known.get(key, {}))
            e.update(section=key[0], group=key[1], name=key[2])
            entries.append(e)
        write_map(entries, source)
    else:
        entries = list(known.values())
    open_ = write_page(entries, source)
    for e in open_:
        print(f"not covered yet: section {e['section']}, {e['group']}: {e['name']}")
    if "--check" in argv and open_:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
