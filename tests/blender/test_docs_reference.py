"""docs/headless.md against the batch command itself: every argument of the parser the
command runs (``addon/cli/args.py``), every exit code it can end with, in the generated
reference (``./dev docs`` writes it from ``batch.py --help``)."""

from __future__ import annotations

import re
import signal
import sys

from addon_scenes import REPO_ROOT, addon_module

sys.path.insert(0, str(REPO_ROOT / "tools"))
import make_docs  # noqa: E402

args = addon_module("cli.args")
PAGE = REPO_ROOT / "docs" / "headless.md"


def generated(name: str) -> str:
    blocks = make_docs.page_blocks(PAGE.read_text(encoding="utf-8"))
    assert name in blocks, f"docs/headless.md has no generated part '{name}': run ./dev docs"
    return blocks[name]


def test_every_batch_flag_is_in_the_reference() -> None:
    table = generated("batch-flags")
    invocations = re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE)
    shown = {word.strip(",") for inv in invocations for word in inv.split()}
    parser = args.build_parser()
    wanted = {s for action in parser._actions for s in action.option_strings}
    wanted |= {action.dest for action in parser._actions if not action.option_strings}
    missing = sorted(wanted - shown)
    assert not missing, f"batch flags missing from docs/headless.md: {missing}: run ./dev docs"


def test_every_exit_code_is_in_the_reference() -> None:
    table = generated("batch-exit-codes")
    codes = {getattr(args, n) for n in dir(args) if n.startswith("EXIT_")}
    codes |= {128 + signal.SIGINT, 128 + signal.SIGTERM}  # the signals' codes (cli/signals.py)
    missing = sorted(c for c in codes if f"`{c}`" not in table)
    assert not missing, f"exit codes missing from docs/headless.md: {missing}: run ./dev docs"
