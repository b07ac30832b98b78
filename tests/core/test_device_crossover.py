"""The device crossover benchmark: its CPU smoke run without bpy or scipy, and how it reads a
crossover from its rows."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "device_crossover.py"
# the bench runs on GPU machines that have neither; newton only the soft-body model needs
BLOCKED = ("bpy", "scipy", "newton")


def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_crossover_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(n: int, device: str, wall_s: float | None, precision: str = "float64", **extra: object) -> dict:
    gpu = {"cpu": None, "cuda:0": "NVIDIA H200", "cuda:1": "NVIDIA H200"}[device]
    out = {"n": n, "vertices": n * n, "device": device, "gpu_name": gpu, "precision": precision}
    if wall_s is None:
        return out | {"skipped": "budget", "budget_hit": True}
    return out | {"wall_s": wall_s, "budget_hit": False} | extra


def test_quick_run_fits_on_the_cpu_without_bpy_or_scipy_and_writes_its_results(tmp_path: Path) -> None:
    out = tmp_path / "quick.json"
    block = "; ".join(f"sys.modules[{name!r}] = None" for name in BLOCKED)  # import fails
    run = "sys.argv[:] = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    code = f"import runpy, sys; {block}; {run}"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(BENCH), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["format"] == 1 and result["crossovers"] == []  # no CUDA rows in a quick run
    host = result["host"]
    assert host["cpu"] and host["cpu_cores"] >= 1 and host["warp"] and isinstance(host["gpus"], list)
    assert [(r["n"], r["device"], r["precision"]) for r in result["rows"]] == [
        (4, "cpu", "float64"),
        (6, "cpu", "float64"),
    ]
    for r in result["rows"]:
        assert r["vertices"] == r["n"] ** 2 and r["frames"] == 10
        assert 0 < r["wall_s"] < 20 and r["iterations"] >= 1 and r["simulations"] >= r["iterations"]
        assert 0 < r["ms_per_frame"] < 1000 and r["fit_ms_per_simulated_frame"] > 0
        # the fit found the values the targets were made with, from three times off
        assert r["outcome"] == "converged" and not r["budget_hit"]
        assert r["max_parameter_error"] < 0.01 and r["rmse_m"] < 1e-4

    table = tmp_path / "table.json"
    bench_module().main(["--write-table", str(out), "--table", str(table)])
    written = json.loads(table.read_text())
    assert written["gpus"] == [] and written["default"]["crossover_vertices"] == {}
    assert written["written"]["from"] == ["quick.json"]


def test_the_crossover_is_where_cuda_stays_faster() -> None:
    bench = bench_module()
    cpu = [row(8, "cpu", 0.5), row(16, "cpu", 2.0), row(32, "cpu", 10.0), row(64, "cpu", 60.0)]
    # faster at 16, slower again at 32: the crossover is from 64 on
    cuda = [row(8, "cuda:0", 4.0), row(16, "cuda:0", 1.5), row(32, "cuda:0", 11.0), row(64, "cuda:0", 20.0)]
    [found] = bench.crossovers(cpu + cuda)
    assert found["gpu_name"] == "NVIDIA H200" and found["precision"] == "float64"
    assert found["crossover_vertices"] == 64 * 64 and found["largest_measured_vertices"] == 64 * 64
    # slower at the largest size: never
    cuda[-1]["wall_s"] = 61.0
    assert bench.crossovers(cpu + cuda)[0]["crossover_vertices"] is None


def test_a_cpu_fit_cut_by_the_budget_counts_as_slower_and_a_cut_cuda_fit_never_wins() -> None:
    bench = bench_module()
    cpu = [row(16, "cpu", 2.0), row(32, "cpu", 300.0), row(64, "cpu", None)]
    cpu[1]["budget_hit"] = True
    cuda = [row(16, "cuda:0", 3.0), row(32, "cuda:0", 100.0), row(64, "cuda:0", 250.0)]
    assert bench.crossovers(cpu + cuda)[0]["crossover_vertices"] == 32 * 32
    cuda[2] |= {"budget_hit": True}
    assert bench.crossovers(cpu + cuda)[0]["crossover_vertices"] is None


def test_two_devices_of_one_name_give_the_later_crossover() -> None:
    bench = bench_module()
    cpu = [row(8, "cpu", 1.0), row(16, "cpu", 4.0), row(32, "cpu", 20.0)]
    first = [row(8, "cuda:0", 0.5), row(16, "cuda:0", 1.0), row(32, "cuda:0", 2.0)]
    second = [row(8, "cuda:1", 2.0), row(16, "cuda:1", 3.0), row(32, "cuda:1", 5.0)]
    [found] = bench.crossovers(cpu + first + second)
    assert found["crossover_vertices"] == 16 * 16


def test_the_table_keeps_gpus_the_new_results_do_not_measure(tmp_path: Path) -> None:
    bench = bench_module()
    rows = [row(8, "cpu", 1.0), row(16, "cpu", 4.0), row(8, "cuda:0", 2.0), row(16, "cuda:0", 3.0)]
    result = {
        "date": "2026-11-20",
        "host": {"cpu": "Some CPU", "cpu_cores": 16, "warp": "1.19.0", "gpus": ["NVIDIA H200"]},
        "settings": {"frames": 30},
        "rows": rows,
    }
    earlier = bench.table_from_results([result], ["h200.json"], None)
    other = dict(earlier["gpus"][0], gpu_pattern="GeForce RTX 4090", gpu_name="NVIDIA GeForce RTX 4090")
    other["crossover_vertices"] = {"float64": None}
    earlier["gpus"].append(other)
    table = bench.table_from_results([result], ["h200_again.json"], earlier)
    assert [e["gpu_pattern"] for e in table["gpus"]] == ["GeForce RTX 4090", "H200"]
    h200 = table["gpus"][1]
    assert h200["crossover_vertices"] == {"float64": 256}
    assert h200["largest_measured_vertices"] == {"float64": 256}
    assert h200["measured"]["source"] == "bench/device_crossover.py: h200_again.json"
    assert h200["measured"]["host_cpu_cores"] == 16 and h200["measured"]["date"] == "2026-11-20"
    # the most conservative: a GPU never faster makes every unlisted GPU fit on the CPU
    assert table["default"]["crossover_vertices"] == {"float64": None}
    assert table["default"]["from_gpu"] == {"float64": "GeForce RTX 4090"}
    elsewhere = dict(result, host=dict(result["host"], cpu_cores=2))
    with pytest.raises(SystemExit, match="different hosts"):
        bench.table_from_results([result, elsewhere], ["a", "b"], None)
