"""SIGINT and SIGTERM at any moment of a batch run: exit 130/143, a partial report, nothing
baked or saved after the signal, no traceback, no temporary left, the input untouched.

The run sends itself the signal at a named moment (``FIT_TO_TARGET_SELF_SIGNAL``), so the
moments are exact and the tests do not depend on timing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from addon_scenes import TMP, addon_module, demo_blend, fresh_copy
from batch_run import BATCH, SELF_SIGNAL, our_errors, run_batch, sha256, temporaries, tiny_scene

# From the first line of batch.py to the report's rename, in order: while bpy loads, before
# the scene opens, while it is read, as the fit starts, after its first iteration, as it
# ends, as the bake starts, with the cache written, with the .blend written, with the report
# written (the last three before their rename; the cache's is the .blend's).
MOMENTS = [
    "import",
    "open",
    "export",
    "fit",
    "iteration-0",
    "fitted",
    "bake",
    "bake-written",
    "save-written",
    "report-written",
]


@pytest.fixture(scope="module")
def scene_file() -> Path:
    return tiny_scene(TMP / "signals" / "tiny.blend")


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("moment", MOMENTS)
def test_a_signal_at_any_moment_stops_cleanly(
    scene_file: Path, tmp_path: Path, moment: str, signame: str
) -> None:
    scene = fresh_copy(scene_file, tmp_path)
    digest = sha256(scene)
    out = tmp_path / "out"
    out.mkdir()
    report, saved, cache = out / "report.json", out / "fitted.blend", out / "cache"
    proc = run_batch(
        scene,
        "--report",
        report,
        "--save",
        saved,
        "--bake",
        cache,
        "--quiet",
        env={SELF_SIGNAL: f"{moment}:{signame}"},
    )
    signum = int(getattr(signal, signame))
    assert proc.returncode == 128 + signum, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert sha256(scene) == digest
    assert temporaries(tmp_path) == []
    lines = our_errors(proc.stderr)
    assert lines[0].startswith(f"fit-to-target: {signame}: stopping"), lines
    assert lines[-1].startswith(f"fit-to-target: interrupted by {signame}: "), lines

    document = json.loads(report.read_text())  # the partial report
    assert document["status"] == "cancelled" and document["exit_code"] == proc.returncode
    done = MOMENTS[MOMENTS.index(moment) :]
    saved_before = "save-written" not in done  # only a signal after the rename finds it saved
    assert saved.exists() == saved_before
    assert document["saved_to"] == (str(saved) if saved_before else None)
    baked_before = saved_before  # the cache is renamed into place with the .blend that plays it
    assert sorted(p.suffix for p in cache.glob("*")) == ([".pc2"] if baked_before else [])
    fitted = MOMENTS.index(moment) >= MOMENTS.index("iteration-0")
    assert len(document["objects"]) == (1 if fitted else 0)


def test_sigterm_from_outside_during_the_fit(tmp_path: Path) -> None:
    scene = fresh_copy(demo_blend(), tmp_path)  # iterations of a second or so: it lands in the fit
    report = tmp_path / "report.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(BATCH),
            str(scene),
            "--report",
            str(report),
            "--save",
            str(tmp_path / "o.blend"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stdout:
            if line.startswith("fit Cloth iter 0 "):
                proc.send_signal(signal.SIGTERM)
                break
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, (out, err)
    document = json.loads(report.read_text())
    assert document["status"] == "cancelled" and document["exit_code"] == 143
    (entry,) = document["objects"]
    assert entry["status"] == "cancelled"  # stopped after the current iteration, best values so far
    assert not (tmp_path / "o.blend").exists()
    assert temporaries(tmp_path) == [] and "Traceback" not in err


# -- the guard itself -------------------------------------------------------------------------------


def test_second_signal_stops_at_once_except_inside_a_commit() -> None:
    signals = addon_module("cli.signals")
    guard = signals.SignalGuard(threading.Event())
    guard.install()
    try:
        signal.raise_signal(signal.SIGTERM)  # the first: only recorded
        assert guard.interrupted and guard.cancel.is_set()
        with pytest.raises(signals.Interrupted) as stop:
            signal.raise_signal(signal.SIGINT)  # the second: now
        assert stop.value.exit_code == 143  # the first signal decides the exit code
        with pytest.raises(signals.Interrupted):
            with guard.critical():
                signal.raise_signal(signal.SIGINT)  # deferred until the rename is recorded
                committed = True
        assert committed
        with pytest.raises(signals.Interrupted):
            guard.checkpoint()
    finally:
        guard.restore()


def test_signals_before_the_command_starts_are_kept() -> None:
    signals = addon_module("cli.signals")
    guard = signals.SignalGuard(threading.Event())
    pending = [int(signal.SIGINT)]
    guard.adopt(pending)
    assert pending == [] and guard.signum == signal.SIGINT
    with pytest.raises(signals.Interrupted) as stop:
        guard.checkpoint()
    assert stop.value.exit_code == 130
