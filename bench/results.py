"""The benchmarks' latest results: each records its summary in ``bench/results/<name>.json``,
and ``docs/benchmarks.md`` is rendered from those files.

    python bench/results.py            rewrite docs/benchmarks.md from bench/results/ (./dev docs)
    python bench/results.py --check    exit 1 when docs/benchmarks.md is not what the files give

A benchmark calls :func:`record` with what it measured; the record adds the date, the commit,
the machine and the command line, writes the file (replacing the previous run's: history is
in git) and renders the page again. A benchmark that has never recorded a run is listed as
"not run yet". Plain Python: no numpy, Warp or bpy.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PAGE = REPO / "docs" / "benchmarks.md"
FORMAT = 1


@dataclass(frozen=True)
class Benchmark:
    """A benchmark the page lists: its script and what it measures."""

    script: str  # relative to the repository root
    measures: str


BENCHMARKS: dict[str, Benchmark] = {
    "robustness": Benchmark(
        "bench/robustness.py",
        "fits of 2-4 parameters on seeded scenes made by Blender's own cloth, from Blender's defaults, "
        "replayed in Blender's cloth: how often the replay comes within 1 mm, and whether a fit ever "
        "calls itself converged when it is not",
    ),
    "many_parameters": Benchmark(
        "bench/many_parameters.py",
        "every continuous cloth field fitted at once (12 parameters) on robustness scenes: "
        "Levenberg-Marquardt against L-BFGS on the stable gradient, replayed in Blender's cloth "
        "(`table`)",
    ),
    "device_crossover": Benchmark(
        "bench/device_crossover.py",
        "whole cloth fits of N x N clamped sheets (two stiffness values from 3x off) on the CPU and "
        "on each CUDA device: the vertex count from which the GPU is faster, which Device Auto uses",
    ),
    "map_scale": Benchmark(
        "bench/map_scale.py",
        "a free structural map (one weight per vertex) of N x N sheets fitted on a device from a "
        "uniform start: wall time with a warm kernel cache, outcome, steps, the fitted stiffness's "
        "correlation with the hidden one; one rollout's and one map gradient's time, and the "
        "device memory per vertex per substep",
    ),
    "maps": Benchmark(
        "bench/maps.py",
        "stiffness weight maps (region values and free per-vertex maps) fitted on seeded scenes made by "
        "Blender's own cloth from Blender's defaults, written back through the add-on and replayed in "
        "Blender's cloth, against the best uniform value; and the free map's tape gradient against "
        "central differences of the whole rollout",
    ),
    "fabric_lab": Benchmark(
        "bench/fabric_lab.py",
        "Blender cloth settings fitted from fabric lab numbers (weight, cantilever bending length, "
        "Cusick drape coefficient, elongation along the grain and on the bias at 500 gf/cm) on silk-like "
        "to denim-like combinations, then read back by Blender's own cloth on the same rigs built in bpy",
    ),
    "soft_body_cpu_fit": Benchmark(
        "bench/soft_body_cpu_fit.py",
        "a 162-tet soft cube dropped on the ground, Young's modulus and damping fitted from 3x off on "
        "the CPU: Levenberg-Marquardt on finite differences against L-BFGS on the adjoint, and one "
        "adjoint gradient against one forward rollout",
    ),
    "soft_body_robustness": Benchmark(
        "bench/soft_body_robustness.py",
        "Young's modulus and damping of random soft bodies (boxes and spheres, dropped or hanging) "
        "fitted from the model's defaults at VBD's default iterations, with each kind of "
        "Levenberg-Marquardt Jacobian: how often each converges, in what time, and whether a fit "
        "ever calls itself converged with a wrong replay or value",
    ),
    "soft_body_robustness_iterations": Benchmark(
        "bench/soft_body_robustness.py",
        "the same fits with VBD's iterations raised (`--iterations`) until the steps reach the roots "
        "the forward tangents differentiate",
    ),
    "soft_body_regions": Benchmark(
        "bench/soft_body_regions.py",
        "per-region soft-body stiffness (a swung bar in 3 to 9 painted slices of hidden Young's "
        "modulus) fitted on the CPU by Levenberg-Marquardt on finite differences and by L-BFGS on "
        "the adjoint: which is faster as the regions grow",
    ),
    "fabric_device": Benchmark(
        "bench/fabric_device.py",
        "the fabric rigs and a whole fabric fit from lab numbers (weight, bending length, drape "
        "coefficient, elongation along the grain and on the bias) on one device: each rig's run time "
        "with its kernels loaded, and the whole fit's",
    ),
    "self_collision_fit": Benchmark(
        "bench/self_collision_fit.py",
        "tension and bending fitted through cloth self-collision from Blender's defaults on scenes made "
        "by Blender's own cloth (a sleeve collapsing, a sheet folding onto itself on the ground), "
        "written back and replayed by Blender",
    ),
    "many_parameters_spread": Benchmark(
        "bench/many_parameters.py",
        "how far one Levenberg-Marquardt fit of 12 parameters lands from another of the same scene "
        "(starts 0.1 % off, or another machine), and where a candidate method falls among them (`spread`)",
    ),
}


def commit(repo: Path = REPO) -> str:
    """The checked-out commit, with "+ local changes" when the tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + (" + local changes" if dirty else "")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: str = "") -> str:
    """The machine in words: system, CPU and its cores, and the device the benchmark ran on."""
    text = f"{platform.system()} {platform.machine()}, {cpu_name()}, {os.cpu_count()} cores"
    return f"{text}; {device}" if device else text


def command_line(argv: list[str] | None = None) -> str:
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    if script.is_absolute() and script.is_relative_to(REPO):
        script = script.relative_to(REPO)
    return "python " + shlex.join([script.as_posix(), *argv[1:]])


def record(
    name: str,
    summary: dict[str, Any],
    table: tuple[list[str], list[list[str]]] | None = None,
    notes: list[str] | None = None,
    device: str = "",
    results: Path = RESULTS,
) -> Path:
    """Record ``name``'s latest run (replacing the last one) and render the page again.

    ``summary``: what was measured, label -> value; ``table``: (headers, rows) of text
    cells; ``notes``: further lines; ``device``: where the measured work ran, if not this
    CPU (e.g. "cuda:0, NVIDIA H200")."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark '{name}': add it to BENCHMARKS in {Path(__file__).name}")
    data = {
        "format": FORMAT,
        "benchmark": name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "machine": machine(device),
        "command": command_line(),
        "summary": summary,
        "table": {"headers": table[0], "rows": table[1]} if table else None,
        "notes": list(notes or []),
    }
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    if results == RESULTS:
        write_page()
    return path


def cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(text.split()).replace("|", "\\|")


def section(name: str, bench: Benchmark, results: Path) -> list[str]:
    """One benchmark's section of the page: its latest run, or "not run yet"."""
    path = results / f"{name}.json"
    lines = [f"## {name}", "", f"`{bench.script}`: {bench.measures}.", ""]
    if not path.is_file():
        return lines + [f"Not run yet: there is no `bench/results/{name}.json`.", ""]
    data = json.loads(path.read_text(encoding="utf-8"))
    lines += [
        f"Latest run: {data['date']}, commit `{data['commit']}`.",
        f"Machine: {data['machine']}.",
        f"Command: `{data['command']}`.",
        f"Source: `bench/results/{name}.json`.",
        "",
        "| measure | value |",
        "|---|---|",
    ]
    lines += [f"| {cell(k)} | {cell(v)} |" for k, v in data["summary"].items()]
    table = data.get("table")
    if table:
        lines += ["", "| " + " | ".join(map(cell, table["headers"])) + " |"]
        lines += ["|" + "---|" * len(table["headers"])]
        lines += ["| " + " | ".join(map(cell, row)) + " |" for row in table["rows"]]
    if data.get("notes"):
        lines += [""] + [f"- {cell(note)}" for note in data["notes"]]
    return lines + [""]


def render(results: Path = RESULTS) -> str:
    """The whole page ``docs/benchmarks.md``."""
    lines = [
        "# Benchmarks",
        "",
        "<!-- Written by bench/results.py from bench/results/*.json (./dev docs); do not edit. -->",
        "",
        "The latest run of each benchmark, written by the benchmark itself into "
        "`bench/results/<name>.json` and rendered here; earlier runs are in the history of those "
        "files. Every measured figure the other pages refer to is on this page. How to run them: "
        "[Development](development.md#benchmarks).",
        "",
    ]
    for name, bench in BENCHMARKS.items():
        lines += section(name, bench, results)
    lines += ["## Not recorded yet", "", "These scripts print what they measure but do not record it:", ""]
    lines += [f"- `bench/{path.name}`: {first_line(path)}" for path in unrecorded()]
    return "\n".join(lines).rstrip("\n") + "\n"


def first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def unrecorded(bench: Path = REPO / "bench") -> list[Path]:
    """The scripts under bench/ that run as a command but are not in :data:`BENCHMARKS`."""
    recorded = {Path(b.script).name for b in BENCHMARKS.values()} | {Path(__file__).name}
    return [
        path
        for path in sorted(bench.glob("*.py"))
        if path.name not in recorded and '__name__ == "__main__"' in path.read_text(encoding="utf-8")
    ]


def write_page(page: Path = PAGE, results: Path = RESULTS) -> bool:
    """Render the page; True when it changed."""
    text = render(results)
    if page.is_file() and page.read_text(encoding="utf-8") == text:
        return False
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale")
    args = parser.parse_args(argv)
    if args.check:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != render():
            print(f"{PAGE.relative_to(REPO)} is stale: run ./dev docs", file=sys.stderr)
            return 1
        return 0
    changed = write_page()
    print(f"docs/benchmarks.md: {'updated' if changed else 'already up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
