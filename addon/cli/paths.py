"""Every path the batch command will write, checked before any work: each output is a
regular file or absent, in a folder this process can write, and none is the input or
another output. A run that would lose a file stops here with exit 2 and writes nothing."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ...warp_core.io import (
    OutputPathError,
    check_output_file,
    check_output_folder,
    remove_stale_temporaries,
    same_file,
)
from ..scene.bake import bake_filename
from .args import UsageError


@dataclass
class OutputPlan:
    """Resolved output paths of one run (None: not asked for)."""

    input: Path
    save: Path | None = None
    report: Path | None = None
    bake_dir: Path | None = None
    bake_files: dict[str, Path] = field(default_factory=dict)  # object name -> .pc2

    def folders(self) -> list[Path]:
        found = [p.parent for p in (self.save, self.report) if p is not None]
        if self.bake_dir is not None:
            found.append(self.bake_dir)
        return list(dict.fromkeys(found))

    def remove_stale_temporaries(self) -> None:
        """Temporaries that killed runs left where this run writes."""
        for folder in self.folders():
            remove_stale_temporaries(folder)


def plan_outputs(args: argparse.Namespace, input_path: Path) -> OutputPlan:
    """Check ``--save``, ``--report`` and ``--bake`` against the input and each other."""
    try:
        plan = OutputPlan(input=input_path)
        if args.save:
            plan.save = check_output_file(args.save, "--save")
        elif args.in_place:
            plan.save = check_output_file(input_path, "--in-place")
        if plan.save is not None and same_file(plan.save, input_path) and not args.in_place:
            raise UsageError("--save would overwrite the input file: add --in-place to allow that")
        if args.report:
            plan.report = check_output_file(args.report, "--report")
            if same_file(plan.report, input_path):
                raise UsageError(f"--report {args.report} is the input file: choose another file")
            if same_file(plan.report, plan.save):
                raise UsageError(f"--report and --save name the same file {plan.report}: choose two files")
        if args.bake:
            plan.bake_dir = check_output_folder(args.bake, "--bake")
    except OutputPathError as e:
        raise UsageError(str(e)) from e
    return plan


def plan_bake_files(plan: OutputPlan, names: Iterable[str]) -> None:
    """The ``.pc2`` of each object in ``--bake DIR``: unique (also where case does not count)
    and none of them the input, ``--save`` or ``--report``."""
    if plan.bake_dir is None:
        return
    taken: dict[str, str] = {}
    for name in names:
        path = plan.bake_dir / bake_filename(name)
        if plan.bake_dir.is_dir():  # else it is made at bake time, empty
            try:
                path = check_output_file(path, "--bake")
            except OutputPathError as e:
                raise UsageError(str(e)) from e
        for other, flag in ((plan.input, "the input file"), (plan.save, "--save"), (plan.report, "--report")):
            if same_file(path, other):
                raise UsageError(f"--bake: the cache of '{name}' would overwrite {flag} ({path})")
        key = path.name.casefold()
        if key in taken:
            raise UsageError(f"--bake: '{name}' and '{taken[key]}' would share the cache file {path.name}")
        taken[key] = name
        plan.bake_files[name] = path
