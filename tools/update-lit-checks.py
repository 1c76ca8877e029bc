#!/usr/bin/env python3
"""Regenerate the generated CHECK lines of apir's lit tests.

A lit test opts in by delimiting a block of CHECK lines with markers:

    // @generated-checks begin prefix=CHECK
    // CHECK:      {{^}}0 dst MEM_PATTERN4D 32 1000100201000100010001000800010001000100{{$}}
    // CHECK-NEXT: {{^}}0 src TENSOR4D 32 007f830101000100010001001000010001000100{{$}}
    // CHECK-NOT:  {{.}}
    // @generated-checks end

The block is rewritten from the output of the test's RUN line that pipes
into `filecheck %s` with that prefix (`--check-prefix=P`, default CHECK):
the command before `| filecheck` is run (with `%s`, `%t`, `%S` substituted
as lit does), and every line it prints becomes one anchored check, the
first `P:`, the others `P-NEXT:` (`P-EMPTY:` for an empty line), then
`P-NOT: {{.}}` so nothing more may follow. The checks mean the same to
LLVM FileCheck and to the Python `filecheck`.

Everything outside the markers is left as written: comments explaining the
bytes stay. Run it after a change that moves bytes, review the diff, and
commit it (the way LLVM's update_test_checks.py is used):

    cargo build -p apir-tools
    tools/update-lit-checks.py --bin-dir target/debug lit-tests/lower-to-wire/wire-hex.apir
    tools/update-lit-checks.py --bin-dir target/debug --check lit-tests   # exit 1 if any block is stale

Arguments are test files or directories (searched for `*.apir` files with
markers). The apir tools are taken from PATH (`--bin-dir DIR` puts DIR
first; the commands run in each test's directory, so a directory given on
PATH must be absolute). A RUN command that does not exit as its line says
is an error.
"""

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile

BEGIN = re.compile(r"^// @generated-checks begin prefix=([A-Za-z0-9_-]+)\s*$")
END = "// @generated-checks end"
RUN = re.compile(r"^//\s*RUN:\s?(.*)$")
FILECHECK = re.compile(r"\|\s*filecheck\s+%s\b(?P<args>[^|]*)$")


def run_lines(lines):
    """The RUN commands of a test, continuation lines joined."""
    out, cur = [], None
    for line in lines:
        m = RUN.match(line)
        if not m:
            continue
        text = m.group(1).rstrip()
        cur = text if cur is None else cur + " " + text
        if cur.endswith("\\"):
            cur = cur[:-1].rstrip()
            continue
        out.append(cur)
        cur = None
    return out


def prefix_of(args):
    m = re.search(r"--check-prefix(?:es)?[= ]([A-Za-z0-9_,-]+)", args)
    return m.group(1).split(",") if m else ["CHECK"]


def command_for(prefix, runs):
    """The command whose output the checks of `prefix` read."""
    found = []
    for r in runs:
        m = FILECHECK.search(r)
        if m and prefix in prefix_of(m.group("args")):
            found.append(r[: m.start()].strip())
    if len(found) != 1:
        raise SystemExit(
            f"error: {len(found)} RUN lines pipe into `filecheck %s` with prefix {prefix}; "
            "a generated block needs exactly one"
        )
    return found[0]


def escape(text):
    """FileCheck-literal text: `[[` and `{{` would start a variable or a regex."""
    return text.replace("{{", "{{\\{\\{}}").replace("[[", "{{\\[\\[}}")


def checks(prefix, output):
    lines = output.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    for i, line in enumerate(lines):
        if line.strip() == "":
            if i == 0:
                raise SystemExit("error: the output starts with an empty line")
            out.append(f"// {prefix}-EMPTY:")
            continue
        tag = f"{prefix}:" if i == 0 else f"{prefix}-NEXT:"
        out.append(f"// {tag:<{len(prefix) + 6}} {{{{^}}}}{escape(line)}{{{{$}}}}")
    out.append(f"// {prefix}-NOT: {{{{.}}}}")
    return out


def run(cmd, path, tmp):
    """The output of a RUN command, which must succeed (fail, after `not`):
    a command that cannot run (a tool missing from PATH) is an error, never
    an empty block of checks."""
    cmd = cmd.replace("%s", path).replace("%S", os.path.dirname(path)).replace("%t", tmp)
    expect_failure = cmd.startswith("not ")
    if expect_failure:
        cmd = cmd[4:]
    p = subprocess.run(
        ["bash", "-c", "set -o pipefail; " + cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=os.path.dirname(path) or ".",
    )
    if (p.returncode != 0) != expect_failure:
        want = "fail" if expect_failure else "succeed"
        raise SystemExit(
            f"error: {path}: `{cmd}` exited with {p.returncode}, but its RUN line wants it to {want}:\n"
            + p.stderr.decode("utf-8", "replace")
        )
    return p.stdout.decode("utf-8", "replace")


def update(path):
    """The file's text with its generated blocks regenerated."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    runs = run_lines(lines)
    out, i = [], 0
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = os.path.join(tmpdir, "t")
        while i < len(lines):
            m = BEGIN.match(lines[i])
            out.append(lines[i])
            i += 1
            if not m:
                continue
            prefix = m.group(1)
            end = next((j for j in range(i, len(lines)) if lines[j].strip() == END), None)
            if end is None:
                raise SystemExit(f"error: {path}: `{END}` missing after line {i}")
            out.extend(checks(prefix, run(command_for(prefix, runs), path, tmp)))
            out.append(lines[end])
            i = end + 1
    return "\n".join(out)


def files(args):
    for a in args:
        if os.path.isdir(a):
            for root, dirs, names in os.walk(a):
                dirs[:] = sorted(d for d in dirs if d != "Inputs")
                for n in sorted(names):
                    if n.endswith(".apir"):
                        yield os.path.join(root, n)
        else:
            yield a


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="lit test files or directories")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is stale")
    ap.add_argument("--bin-dir", help="directory of apir-opt and apir-dis, put first on PATH")
    args = ap.parse_args()
    if args.bin_dir:
        os.environ["PATH"] = os.path.abspath(args.bin_dir) + os.pathsep + os.environ.get("PATH", "")
    stale, seen = 0, 0
    for path in files(args.paths):
        with open(path, encoding="utf-8") as f:
            old = f.read()
        if "// @generated-checks begin" not in old:
            continue
        seen += 1
        new = update(os.path.abspath(path))
        if new == old:
            continue
        stale += 1
        if args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), path, path + " (regenerated)"
                )
            )
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"updated {path}")
    if seen == 0:
        print("error: no test with generated checks found", file=sys.stderr)
        return 1
    if args.check and stale:
        print(f"{stale} of {seen} tests have stale generated checks", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
