# -*- Python -*-
# lit configuration of the apir test suite.
#
# Normally run through `cargo test -p apir-tools --test integration lit_suite` (tools/tests/integration/lit.rs),
# which provisions lit and filecheck in target/lit-venv, puts the freshly built
# binaries first on PATH and sets APIR_LIT_EXEC_ROOT. By hand:
#
#   cargo build -p apir-tools
#   PATH=$PWD/target/debug:$PATH target/lit-venv/bin/lit -v lit-tests
#
# RUN lines see:
#   apir-opt   the tool, found on PATH (falls back to <target>/debug)
#   filecheck  $FILECHECK if set (e.g. LLVM's FileCheck), else the `filecheck`
#              port from PyPI installed next to this lit
#   not CMD    succeeds iff CMD exits with status 1 or 2 (a user error); a
#              success, an internal error (3) or a crash (signal) fails
#   bash       RUN lines run in an external bash (`set -o pipefail`), so `$?`,
#              `||`, `;`, `{ ...; }` and `echo` work; exact exit codes are
#              checked as `{ apir-opt ... 2>&1; echo "exit=$?"; } | filecheck %s`.

import os
import shlex
import shutil
import sys

import lit.formats

config.name = "apir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".apir"]
# `Inputs` folders hold files that tests read; they are not tests themselves.
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))

repo_root = os.path.dirname(config.test_source_root)
target_dir = os.environ.get("CARGO_TARGET_DIR") or os.path.join(repo_root, "target")
if not os.path.isabs(target_dir):
    target_dir = os.path.join(repo_root, target_dir)

# Scratch files (%t, Output/) go under the cargo target dir, never into the
# source tree.
config.test_exec_root = os.environ.get("APIR_LIT_EXEC_ROOT") or os.path.join(target_dir, "lit")

# --- PATH: helper scripts first, then whatever the caller put first (the
# cargo binary dir when run by tools/tests/integration/lit.rs).
helper_dir = os.path.join(config.test_exec_root, ".bin")
NOT_SCRIPT = """#!/bin/sh
# not CMD...: succeeds iff CMD exits with status 1 or 2 (the tools' user-error
# codes). Exit 0, the internal-error code 3 and death by a signal all fail.
"$@"
rc=$?
if [ "$rc" -eq 1 ] || [ "$rc" -eq 2 ]; then
  exit 0
fi
echo "not: command exited with status $rc (expected 1 or 2): $*" >&2
exit 1
"""


def write_helper(name, text):
    path = os.path.join(helper_dir, name)
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text and os.access(path, os.X_OK):
                return
    except OSError:
        pass
    os.makedirs(helper_dir, exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


write_helper("not", NOT_SCRIPT)

path = os.pathsep.join([helper_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
if shutil.which("apir-opt", path=path) is None:
    fallback = os.path.join(target_dir, "debug")
    if shutil.which("apir-opt", path=fallback) is None:
        lit_config.fatal(
            "apir-opt is not on PATH and not in %s; run `cargo build -p apir-tools` "
            "or `cargo test -p apir-tools --test integration lit_suite`" % fallback
        )
    path = os.pathsep.join([helper_dir, fallback, path.split(os.pathsep, 1)[1]])
config.environment["PATH"] = path
lit_config.note("apir-opt: %s" % shutil.which("apir-opt", path=path))

# --- filecheck: $FILECHECK (LLVM's FileCheck works too) or the PyPI port.
filecheck = os.environ.get("FILECHECK")
if filecheck:
    resolved = shutil.which(filecheck)
    if resolved is None:
        lit_config.fatal("FILECHECK=%s is not an executable" % filecheck)
    filecheck = resolved
else:
    # The port's entry point sits next to the interpreter running lit (the
    # venv's bin/ or Scripts/), else anywhere on PATH.
    filecheck = shutil.which("filecheck", path=os.path.dirname(sys.executable)) or shutil.which(
        "filecheck", path=path
    )
    if filecheck is None:
        lit_config.fatal(
            "no `filecheck`: pip install -r lit-tests/requirements.txt, or set FILECHECK "
            "to LLVM's FileCheck"
        )
lit_config.note("filecheck: %s" % filecheck)

# Replace the word `filecheck` where it stands as a command (not inside a
# path or a longer word). Substitutions are regexes; escape the replacement.
config.substitutions.append(
    (r"(?<![\w./-])filecheck(?![\w./-])", shlex.quote(filecheck).replace("\\", "\\\\"))
)

# Deterministic tool output: no colours. (lit passes only a few variables
# through, so RUST_BACKTRACE and friends from the caller do not reach tests.)
config.environment["NO_COLOR"] = "1"
