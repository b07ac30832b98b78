"""The mutation benchmark's planted bugs still apply: each replaces text found exactly once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from mutation_list import MUTATIONS  # noqa: E402
from mutation_list_soft_body import MUTATIONS as SOFT_BODY_MUTATIONS  # noqa: E402

ALL = list({m.id: m for m in MUTATIONS + SOFT_BODY_MUTATIONS}.values())


@pytest.mark.parametrize("mutation", ALL, ids=lambda m: m.id)
def test_each_mutation_matches_its_file_once(mutation) -> None:
    text = (REPO / mutation.path).read_text()
    assert text.count(mutation.old) == 1, f"{mutation.id}: {mutation.old!r} in {mutation.path}"
    assert mutation.new != mutation.old
