"""The generated parts of the docs, written or checked in one go (``./dev docs``).

    python tools/make_docs.py            write every generated part (./dev docs)
    python tools/make_docs.py --check    exit 1, naming each stale part, when one is not the source's

What is generated, and from what:

- ``docs/headless.md``: the batch command's flags and exit codes, the core command's flags
  and exit codes, the report's fields (``tools/docs_headless.py``);
- ``docs/troubleshooting.md``: every refusal message, by section (``tools/refusals.py``);
- ``docs/presets.md``: the built-in presets' values (``tools/docs_presets.py``);
- ``docs/code-map.md``: the code map (``tools/code_map.py``);
- ``docs/benchmarks.md``: the benchmarks' latest runs (``bench/results.py``).

Inside a page a generated part sits between ``<!-- BEGIN GENERATED name -->`` and
``<!-- END GENERATED name -->``; the text around it is written by hand and kept.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parent
REPO_ROOT = TOOLS.parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import code_map  # noqa: E402
import docs_headless  # noqa: E402
import docs_presets  # noqa: E402
import refusals  # noqa: E402

BEGIN = "<!-- BEGIN GENERATED {} -->"
END = "<!-- END GENERATED {} -->"
BLOCK_RE = re.compile(r"<!-- BEGIN GENERATED (\S+) -->\n(.*?)<!-- END GENERATED \1 -->", re.DOTALL)

# page -> the function that makes its generated blocks (name -> content)
PAGES: dict[str, Callable[[Path], dict[str, str]]] = {
    "docs/headless.md": docs_headless.blocks,
    "docs/troubleshooting.md": refusals.blocks,
    "docs/presets.md": docs_presets.blocks,
}


def bench_results() -> ModuleType:
    """``bench/results.py``, loaded from its file (``bench/`` is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_results", REPO_ROOT / "bench" / "results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # before it runs: its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def page_blocks(text: str) -> dict[str, str]:
    """The generated blocks of a page's text: name -> content (without the markers)."""
    return {m.group(1): m.group(2).strip("\n") for m in BLOCK_RE.finditer(text)}


def with_blocks(text: str, blocks: dict[str, str], page: str) -> str:
    """``text`` with each block's content replaced; every block must have its markers, and
    the page may have no block the generator does not make."""
    have = page_blocks(text)
    missing = [name for name in blocks if name not in have]
    unknown = [name for name in have if name not in blocks]
    if missing or unknown:
        raise SystemExit(
            f"{page}: add the markers of {missing} (BEGIN/END GENERATED), remove those of {unknown}"
        )

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        return f"{BEGIN.format(name)}\n{blocks[name]}\n{END.format(name)}"

    return BLOCK_RE.sub(fill, text)


def generated_pages(root: Path = REPO_ROOT) -> dict[str, tuple[str, str]]:
    """page -> (its text now, its text with every generated part made from the source)."""
    out = {}
    for page, make in PAGES.items():
        text = (root / page).read_text(encoding="utf-8")
        out[page] = (text, with_blocks(text, make(root), page))
    text = (root / code_map.DOC).read_text(encoding="utf-8")
    out[code_map.DOC] = (text, code_map.with_block(text, code_map.generate(root)))
    results = bench_results()
    page = results.PAGE.relative_to(REPO_ROOT).as_posix()
    now = (root / page).read_text(encoding="utf-8") if (root / page).is_file() else ""
    out[page] = (now, results.render(root / "bench" / "results"))
    return out


def stale(root: Path = REPO_ROOT) -> list[str]:
    """The pages whose generated parts are not the source's."""
    return [page for page, (now, want) in generated_pages(root).items() if now != want]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated part is stale")
    args = parser.parse_args(argv)
    pages = generated_pages(REPO_ROOT)
    changed = [page for page, (now, want) in pages.items() if now != want]
    if args.check:
        for page in changed:
            print(f"{page}: its generated parts are stale: run ./dev docs", file=sys.stderr)
        return 1 if changed else 0
    for page in changed:
        (REPO_ROOT / page).write_text(pages[page][1], encoding="utf-8")
    for page in pages:
        print(f"{page}: {'updated' if page in changed else 'up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
