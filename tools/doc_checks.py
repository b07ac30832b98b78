"""What the doc tests check in README.md and docs/*.md: the commands shown, and the links.

    python tools/doc_checks.py          list every command block with its marker, and any broken link

Commands are shown in ```` ```console ```` blocks, one command per line after ``$ `` (a line
ending in ``\\`` continues on the next). Each such block follows a marker saying what the tests
do with it: ``<!-- doc-test: run -->`` (run, must exit 0) or ``<!-- doc-test: skip REASON ... -->``
with REASON one of :data:`SKIP_REASONS`. Shell blocks of another language (``sh``, ``bash``,
``shell``) are not allowed: a command is either tested or says why not.

A link is ``[text](target)`` outside code; a relative target must name an existing file, and an
anchor (``page.md#heading``, ``#heading``) a heading of that page, as GitHub makes its anchors.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SKIP_REASONS = {
    "needs-gpu": "needs an NVIDIA GPU",
    "needs-blender": "needs a Blender binary",
    "needs-network": "downloads packages",
    "long": "takes minutes or more (a test suite, a benchmark)",
    "covered-by": "a test named in the marker runs the same check",
}
MARKER_RE = re.compile(r"<!-- doc-test: (run|skip (\S+?):?(?: (.*?))?) -->")
FENCE_RE = re.compile(r"^(`{3,})(\S*)\s*$")
SHELLS = ("sh", "bash", "shell", "zsh")
LINK_RE = re.compile(r"(?<!\\)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass(frozen=True)
class CommandBlock:
    """A ```console block: where it is, what its marker says, and its commands."""

    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    run: bool
    reason: str  # the skip reason ("" for run)
    note: str  # the marker's text after the reason
    commands: tuple[str, ...]


def doc_pages(root: Path = REPO_ROOT) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def fences(text: str) -> list[tuple[int, int, str]]:
    """(opening line index, closing line index, language) of every fenced block."""
    lines = text.splitlines()
    found = []
    k = 0
    while k < len(lines):
        m = FENCE_RE.match(lines[k])
        if m:
            end = next((j for j in range(k + 1, len(lines)) if lines[j].startswith(m.group(1))), len(lines))
            found.append((k, end, m.group(2)))
            k = end + 1
        else:
            k += 1
    return found


def commands(body: list[str]) -> tuple[str, ...]:
    """The ``$ `` commands of a console block's lines, continuations joined."""
    out: list[str] = []
    pending = ""
    for line in body:
        if pending:
            pending += " " + line.strip()
        elif line.startswith("$ "):
            pending = line[2:].strip()
        else:
            continue
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
        else:
            out.append(pending)
            pending = ""
    return tuple(out + ([pending] if pending else []))


def command_blocks(page: Path, root: Path = REPO_ROOT) -> tuple[list[CommandBlock], list[str]]:
    """The page's console blocks, and the problems: unmarked blocks, unknown skip reasons,
    shell blocks of another language."""
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    rel = page.relative_to(root).as_posix()
    blocks, problems = [], []
    for start, end, language in fences(text):
        where = f"{rel}:{start + 1}"
        if language in SHELLS:
            problems.append(f"{where}: a ```{language} block: show commands in ```console with a marker")
            continue
        if language != "console":
            continue
        before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        marker = MARKER_RE.fullmatch(before.strip())
        if marker is None:
            problems.append(f"{where}: no <!-- doc-test: run --> or <!-- doc-test: skip REASON --> above it")
            continue
        reason = marker.group(2) or ""
        if marker.group(1) != "run" and reason not in SKIP_REASONS:
            problems.append(f"{where}: unknown skip reason '{reason}' (known: {', '.join(SKIP_REASONS)})")
            continue
        found = commands(lines[start + 1 : end])
        if not found:
            problems.append(f"{where}: a console block without a '$ ' command")
            continue
        blocks.append(
            CommandBlock(rel, start + 1, marker.group(1) == "run", reason, marker.group(3) or "", found)
        )
    return blocks, problems


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page (repeated headings get -1, -2, ... as on GitHub)."""
    code = {k for start, end, _ in fences(text) for k in range(start, end + 1)}
    seen: dict[str, int] = {}
    found = set()
    for k, line in enumerate(text.splitlines()):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and k not in code:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link outside code blocks and inline code."""
    code = {k for start, end, _ in fences(text) for k in range(start, end + 1)}
    found = []
    for k, line in enumerate(text.splitlines()):
        if k in code:
            continue
        prose = re.sub(r"`+[^`]*`+", "", line)
        found += [(k + 1, m.group(1)) for m in LINK_RE.finditer(prose)]
    return found


def broken_links(root: Path = REPO_ROOT) -> list[str]:
    """Every relative link of README.md and docs/ whose file or anchor does not exist."""
    problems = []
    for page in doc_pages(root):
        text = page.read_text(encoding="utf-8")
        rel = page.relative_to(root).as_posix()
        for line, target in links(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                problems.append(f"{rel}:{line}: {target}: no such file")
            elif not file.resolve().is_relative_to(root.resolve()):
                problems.append(f"{rel}:{line}: {target}: outside the repository")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
                problems.append(f"{rel}:{line}: {target}: no heading '#{anchor}' in {file.name}")
    return problems


def main() -> int:
    problems = broken_links()
    for page in doc_pages():
        blocks, found = command_blocks(page)
        problems += found
        for b in blocks:
            what = "run" if b.run else f"skip ({b.reason})"
            for command in b.commands:
                print(f"{b.page}:{b.line}: {what}: {command}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
