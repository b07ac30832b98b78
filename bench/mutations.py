"""Mutation testing of the test suite: plant one small bug at a time in a temporary copy of
the repository, run the suite on it, and report which bugs the tests catch.

    python bench/mutations.py [--only ID,...] [--jobs N] [--timeout S] [--markdown] [--out FILE]
    python bench/mutations.py --list
    python bench/mutations.py --check     # anchors and syntax only, no tests (seconds)

Each mutation (``mutation_list*.py``) runs in a fresh temporary directory holding the
repository's tracked and untracked, not ignored, files (``git ls-files -co
--exclude-standard``; not ``.venv``). Its ``old`` text must occur exactly once in its file
(otherwise the list has gone stale: an error, never a verdict). The suite then runs there
with this repository's interpreter and Warp's shared kernel cache (unchanged kernels stay
compiled), in two sessions:

    python -m pytest -x -q -rfE -p no:cacheprovider FIRST_FILES...
    python -m pytest -x -q -rfE -p no:cacheprovider tests --ignore=FIRST_FILE...

(the second only if the first passes). One session given ``FIRST_FILES... tests`` would
drop the duplicates but collect the first files in the folder's order, not first. The
files most likely to catch the bug run first and ``-x`` stops at the first failure, so a
caught mutation costs little. Exit 1 (a test failed) is "caught", exit 0 "missed";
anything else (collection error, no tests, timeout) and a failure that is the mutated
code not importing or compiling are "error": a bad mutation, not a catch. Tests get a
temporary folder inside the mutation's directory, which is removed afterwards (on Ctrl-C
too).

Exit status 0 only if every selected mutation was caught. A missed mutation runs the whole
suite, so the full list takes long: this is not part of the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import py_compile
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from mutation_list import Mutation
from mutation_list_soft_body import MUTATIONS

REPO_ROOT = Path(__file__).resolve().parent.parent
# failures that mean the mutated code is broken, not that a test noticed a wrong result
BROKEN_CODE = re.compile(
    r"^([\w.]*\.)?(ImportError|ModuleNotFoundError|SyntaxError|IndentationError|NameError|WarpCodegen\w*)\b"
    r"|kernel build failed|Error while parsing function"
)
EXIT_REASONS = {1: "no summary line", 2: "collection error", 3: "internal error", 4: "usage", 5: "no tests"}
INTERRUPT_GRACE_S = 10.0  # pytest cleans up its temporary profile on SIGINT; then SIGKILL


class AnchorError(ValueError):
    """The mutation's ``old`` text does not occur exactly once: the list has gone stale."""


@dataclass
class Outcome:
    id: str
    description: str
    result: str  # caught, missed or error
    first_failure: str = ""  # the first failing test id (caught), or why it is an error
    seconds: float = 0.0
    exit_code: int | None = None
    output_tail: str = ""


def mutate(text: str, mutation: Mutation) -> str:
    """``text`` with the mutation applied; AnchorError unless ``old`` occurs exactly once."""
    count = text.count(mutation.old)
    if count == 0:
        raise AnchorError(f"anchor not found in {mutation.path} (the mutation list has gone stale)")
    if count > 1:
        raise AnchorError(f"anchor occurs {count} times in {mutation.path} (ambiguous)")
    return text.replace(mutation.old, mutation.new)


def repo_files(root: Path) -> list[str]:
    """Tracked and untracked, not ignored, files that exist now (a deleted file is skipped)."""
    command = ["git", "ls-files", "-z", "-co", "--exclude-standard"]
    listing = subprocess.run(command, cwd=root, check=True, capture_output=True).stdout.decode()
    names = sorted({n for n in listing.split("\0") if n})
    return [n for n in names if (root / n).is_file() or (root / n).is_symlink()]


def copy_repo(root: Path, files: list[str], dest: Path) -> None:
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target, follow_symlinks=False)


def warp_cache_path() -> str:
    """Warp's kernel cache as ``tests/conftest.py`` picks it, shared by every copy."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fit_to_target" / "warp"
    return os.environ.get("WARP_CACHE_PATH", str(cache))


def python_executable() -> str:
    venv = REPO_ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def existing_first_files(mutation: Mutation, root: Path) -> list[str]:
    return [f for f in mutation.first if (root / f).is_file()]


class Children:
    """The running pytest processes, so that Ctrl-C can end every process group (each
    worker then removes its own copy)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.processes: set[subprocess.Popen] = set()
        self.stopping = threading.Event()

    def start(self, command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
        with self.lock:
            if self.stopping.is_set():
                raise KeyboardInterrupt
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,  # its own process group: pytest and what it spawns
            )
            self.processes.add(process)
            return process

    def finished(self, process: subprocess.Popen) -> None:
        with self.lock:
            self.processes.discard(process)

    def stop_all(self) -> None:
        self.stopping.set()
        with self.lock:
            running = list(self.processes)
        for process in running:
            end_group(process)


def end_group(process: subprocess.Popen) -> None:
    """SIGINT to the process group (pytest cleans up on it), SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):  # the group has ended
        os.killpg(process.pid, signal.SIGINT)
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.killpg(process.pid, signal.SIGKILL)  # also any child left behind by the group


PYTEST = ["-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider"]


def run_pytest(copy: Path, paths: list[str], timeout: float, children: Children) -> tuple[int | None, str]:
    """(pytest's exit code, or None on timeout; its output) for ``paths`` in ``copy``."""
    tmp = copy.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    # COLUMNS: the summary lines keep the exception's name and message untruncated
    env = {**os.environ, "WARP_CACHE_PATH": warp_cache_path(), "TMPDIR": str(tmp), "COLUMNS": "240"}
    env.pop("PYTEST_ADDOPTS", None)
    process = children.start([python_executable(), *PYTEST, *paths], copy, env)
    output_parts: list[str] = []
    reader = threading.Thread(target=lambda: output_parts.append(process.stdout.read()), daemon=True)
    reader.start()
    try:
        process.wait(timeout=max(timeout, 1.0))
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        end_group(process)
        code = None
    finally:
        children.finished(process)
    reader.join(timeout=INTERRUPT_GRACE_S)
    return code, "".join(output_parts)


def run_suite(copy: Path, first: list[str], timeout: float, children: Children) -> tuple[int | None, str]:
    """The first files, then (if they all pass) the rest of the suite without them: pytest
    collects a file inside a given folder in the folder's order, not first."""
    deadline = time.monotonic() + timeout
    output = ""
    if first:
        code, output = run_pytest(copy, first, timeout, children)
        if code != 0:
            return code, output
    rest = ["tests", *(f"--ignore={f}" for f in first)]
    code, more = run_pytest(copy, rest, deadline - time.monotonic(), children)
    return code, output + more


def summary_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))]


def tail(output: str, lines: int = 40) -> str:
    return "\n".join(output.rstrip().splitlines()[-lines:])


def classify(mutation: Mutation, code: int | None, output: str, timeout: float) -> Outcome:
    out = Outcome(mutation.id, mutation.description, "error", exit_code=code, output_tail=tail(output))
    summary = summary_lines(output)
    if code is None:
        out.first_failure = f"timed out after {timeout:g} s"
    elif code == 0:
        out.result = "missed"
    elif code == 1 and summary and BROKEN_CODE.search(summary[0].partition(" - ")[2]):
        out.first_failure = f"the mutated code is broken: {summary[0]}"
    elif code == 1 and summary:
        out.result = "caught"
        kind, _, test = summary[0].partition(" - ")[0].partition(" ")
        out.first_failure = test + (" (error in setup or teardown)" if kind == "ERROR" else "")
    else:
        where = summary[0] if summary else (tail(output, 1) or "no output")
        raised = next((line[1:].strip() for line in output.splitlines() if line.startswith("E  ")), "")
        out.first_failure = f"pytest exit {code} ({EXIT_REASONS.get(code, 'unexpected')}): {where}"
        out.first_failure += f": {raised}" if raised else ""
    return out


def run_mutation(mutation: Mutation, files: list[str], timeout: float, children: Children) -> Outcome:
    """Copy the repository, apply ``mutation``, run the suite there, remove the copy."""
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=f"mutation-{mutation.id}-"))
    try:
        copy = work / "repo"
        copy_repo(REPO_ROOT, files, copy)
        path = copy / mutation.path
        try:
            if not path.is_file():
                raise AnchorError(f"{mutation.path} does not exist (the mutation list has gone stale)")
            path.write_text(mutate(path.read_text(encoding="utf-8"), mutation), encoding="utf-8")
        except AnchorError as e:
            outcome = Outcome(mutation.id, mutation.description, "error", str(e))
        else:
            first = existing_first_files(mutation, copy)
            code, output = run_suite(copy, first, timeout, children)
            outcome = classify(mutation, code, output, timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    outcome.seconds = round(time.perf_counter() - started, 1)
    return outcome


def check_mutation(mutation: Mutation, files: set[str], scratch: Path) -> str | None:
    """Why the mutation cannot be applied to the working tree (None: it can): its file is
    not copied, its anchor does not match exactly once, or the result does not compile."""
    if mutation.path not in files:
        return f"{mutation.path} is not among the repository's files"
    if mutation.old == mutation.new:
        return "old and new text are the same"
    try:
        text = mutate((REPO_ROOT / mutation.path).read_text(encoding="utf-8"), mutation)
    except AnchorError as e:
        return str(e)
    target = scratch / mutation.id / mutation.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    try:
        py_compile.compile(str(target), cfile=str(target) + "c", doraise=True)
    except py_compile.PyCompileError as e:
        return f"does not compile: {e.msg.strip().splitlines()[-1]}"
    return None


def check_all(mutations: list[Mutation]) -> int:
    files = set(repo_files(REPO_ROOT))
    failed = 0
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as scratch:
        for m in mutations:
            problem = check_mutation(m, files, Path(scratch))
            missing = [f for f in m.first if f not in existing_first_files(m, REPO_ROOT)]
            note = f"  (first files not present, left out: {', '.join(missing)})" if missing else ""
            if problem:
                failed += 1
                print(f"FAIL  {m.id}: {problem}")
            else:
                print(f"ok    {m.id}: {m.path}{note}")
    print(f"{len(mutations) - failed} of {len(mutations)} mutations apply once and compile")
    return 1 if failed else 0


def list_mutations(mutations: list[Mutation]) -> None:
    for m in mutations:
        first = [f + ("" if (REPO_ROOT / f).is_file() else " (absent)") for f in m.first]
        print(f"{m.id}: {m.description}")
        print(f"    {m.path}: {m.old.strip()!r} -> {m.new.strip()!r}")
        print(f"    first: {', '.join(first) or '-'}")


def table(outcomes: list[Outcome], markdown: bool) -> str:
    header = ["id", "description", "result", "first failing test", "seconds"]
    rows = [[o.id, o.description, o.result, o.first_failure or "-", f"{o.seconds:.1f}"] for o in outcomes]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(widths[k]) for k, cell in enumerate(row)).rstrip() for row in [header, *rows]
    )


def run_all(mutations: list[Mutation], jobs: int, timeout: float) -> list[Outcome] | None:
    """Every mutation, ``jobs`` at a time, in list order in the result; None on Ctrl-C."""
    files = repo_files(REPO_ROOT)
    children = Children()
    outcomes: dict[str, Outcome] = {}
    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = {pool.submit(run_mutation, m, files, timeout, children): m for m in mutations}
    try:
        for done, future in enumerate(as_completed(futures), start=1):
            m = futures[future]
            try:
                o = future.result()
            except OSError as e:  # the copy could not be made or removed
                o = Outcome(m.id, m.description, "error", f"the runner failed: {e}")
            outcomes[o.id] = o
            detail = f" ({o.first_failure})" if o.first_failure else ""
            print(f"[{done}/{len(mutations)}] {o.id}: {o.result}{detail}, {o.seconds:.1f} s", file=sys.stderr)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
        print("interrupted: stopping the running tests and removing the copies", file=sys.stderr)
        children.stop_all()
        pool.shutdown(wait=True, cancel_futures=True)  # each worker removes its own copy
        return None
    pool.shutdown(wait=True)
    return [outcomes[m.id] for m in mutations]


def select(only: str | None) -> list[Mutation]:
    ids = [m.id for m in MUTATIONS]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise SystemExit(f"mutations.py: duplicate mutation ids: {', '.join(duplicates)}")
    if not only:
        return list(MUTATIONS)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in ids]
    if unknown:
        raise SystemExit(f"mutations.py: unknown mutation id(s): {', '.join(unknown)} (see --list)")
    return [m for m in MUTATIONS if m.id in wanted]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Plant small bugs one at a time and see which the tests catch.")
    p.add_argument("--only", metavar="ID[,ID...]", help="run only these mutations")
    p.add_argument("--list", action="store_true", help="print the mutations and exit")
    p.add_argument("--check", action="store_true", help="check every anchor and that the result compiles")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="mutations run in parallel (default 1)")
    p.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds per mutation (900)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--out", type=Path, metavar="FILE", help="also write the results as JSON")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.timeout <= 0:
        p.error("--jobs must be at least 1 and --timeout above 0")
    return args


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mutations = select(args.only)
    if args.list:
        list_mutations(mutations)
        return 0
    if args.check:
        return check_all(mutations)
    signal.signal(signal.SIGTERM, _interrupt)  # a killed run still removes its copies
    outcomes = run_all(mutations, args.jobs, args.timeout)
    if outcomes is None:
        return 130
    print(table(outcomes, args.markdown))
    counts = {r: sum(o.result == r for o in outcomes) for r in ("caught", "missed", "error")}
    print(f"caught {counts['caught']}, missed {counts['missed']}, error {counts['error']} of {len(outcomes)}")
    if args.out:
        args.out.write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n", encoding="utf-8")
    return 0 if counts["caught"] == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
