"""Device "AUTO" by the cloth's size: the choice from a crossover table and the CUDA devices
there are (passed in: the rule is a plain function), and the committed table itself."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from addon_scenes import REPO_ROOT, addon_module, core_module

warp_setup = addon_module("warp_setup")
devices = core_module("devices")
errors = addon_module("errors")
H200 = "NVIDIA H200"
RTX = "NVIDIA GeForce RTX 4090"


def bench_module() -> ModuleType:
    path = REPO_ROOT / "bench" / "device_crossover.py"
    spec = importlib.util.spec_from_file_location("device_crossover_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(gpu: str, alias: str, precision: str, walls: list[float]) -> list[dict]:
    sizes = (8, 16, 32, 64)
    return [
        {"n": n, "device": alias, "gpu_name": gpu, "precision": precision, "wall_s": w, "budget_hit": False}
        for n, w in zip(sizes, walls, strict=True)
    ]


@pytest.fixture(scope="module")
def table_data() -> dict:
    """A table as the bench writes it: the H200 faster from 32 x 32 (float64) and 16 x 16
    (float32), the RTX 4090 (float64 only) slower at every size, both on a 16-core host."""
    measured = rows(None, "cpu", "float64", [0.5, 2.0, 10.0, 60.0])
    measured += rows(H200, "cuda:0", "float64", [5.0, 6.0, 8.0, 20.0])
    measured += rows(H200, "cuda:0", "float32", [4.0, 1.5, 3.0, 10.0])
    host = {"cpu": "Some CPU", "cpu_cores": 16, "warp": "1.19.0", "gpus": [H200]}
    h200 = {"date": "2026-11-20", "host": host, "settings": {"frames": 30}, "rows": measured}
    table = bench_module().table_from_results([h200], ["h200.json"], None)
    rtx_rows = measured[:4] + rows(RTX, "cuda:0", "float64", [5.0, 6.0, 12.0, 70.0])
    rtx = dict(h200, rows=rtx_rows, host=dict(host, gpus=[RTX]))
    return bench_module().table_from_results([rtx], ["rtx.json"], table)


def choose(table_data: dict, vertices: int | None, gpus: list[str], precision: str = "float64"):
    table = warp_setup.CrossoverTable.from_data(table_data)
    return warp_setup.choose_device("AUTO", vertices, cuda_names=gpus, table=table, precision=precision)


def test_auto_fits_small_cloths_on_the_cpu_and_large_ones_on_the_gpu(table_data: dict) -> None:
    small = choose(table_data, 400, [H200])
    assert small.device == "cpu"
    assert small.reason == (
        "CPU: 400 vertices, below the 1,024 at which the NVIDIA H200 is faster "
        "(measured 2026-11-20 against a 16-core CPU)"
    )
    at = choose(table_data, 1024, [H200])
    assert at.device == "cuda:0" and at.reason.startswith("cuda:0 (NVIDIA H200): 1,024 vertices, at or above")
    large = choose(table_data, 16384, [H200])
    assert large.device == "cuda:0" and "16,384 vertices" in large.reason and "1,024" in large.reason
    # float32 on the H200 was faster from 16 x 16
    assert choose(table_data, 400, [H200], "float32").device == "cuda:0"
    assert choose(table_data, 255, [H200], "float32").device == "cpu"


def test_a_gpu_never_faster_keeps_the_cpu_and_an_unmeasured_one_takes_the_most_conservative(
    table_data: dict,
) -> None:
    rtx = choose(table_data, 100_000, [RTX])
    assert rtx.device == "cpu"
    assert "was not faster than the CPU at any size measured, up to 4,096 vertices" in rtx.reason
    # an unmeasured GPU: the RTX 4090's "never" is the most conservative float64 crossover
    a100 = choose(table_data, 100_000, ["NVIDIA A100-SXM4-80GB"])
    assert a100.device == "cpu" and "this GPU not measured" in a100.reason and RTX in a100.reason
    # ... and the H200's at float32, the only GPU measured there
    a100 = choose(table_data, 300, ["NVIDIA A100-SXM4-80GB"], "float32")
    assert a100.device == "cuda:0" and "the NVIDIA H200's" in a100.reason


def test_of_several_gpus_the_one_faster_first_is_chosen(table_data: dict) -> None:
    both = choose(table_data, 2000, [RTX, H200])
    assert both.device == "cuda:1" and both.reason.startswith("cuda:1 (NVIDIA H200)")
    assert choose(table_data, 500, [RTX, H200]).device == "cpu"


def test_without_a_gpu_a_size_or_a_measurement_auto_means_what_it_did(table_data: dict) -> None:
    assert choose(table_data, 100_000, []) == warp_setup.DeviceChoice("cpu", "CPU: no CUDA device found")
    unsized = choose(table_data, None, [H200])
    assert unsized.device == "cuda:0" and "size was not given" in unsized.reason
    empty = copy.deepcopy(table_data)
    empty["gpus"], empty["default"]["crossover_vertices"], empty["default"]["from_gpu"] = [], {}, {}
    unmeasured = choose(empty, 10, [H200])
    assert unmeasured.device == "cuda:0" and "no GPU measured at float64" in unmeasured.reason


def test_named_devices_are_checked_and_kept(table_data: dict) -> None:
    table = warp_setup.CrossoverTable.from_data(table_data)
    cpu = warp_setup.choose_device("cpu", 100_000, cuda_names=[H200], table=table)
    assert cpu == warp_setup.DeviceChoice("cpu", "CPU: as asked")
    cuda = warp_setup.choose_device("cuda", 10, cuda_names=[H200], table=table)
    assert cuda == warp_setup.DeviceChoice("cuda:0", "cuda:0 (NVIDIA H200): as asked")
    with pytest.raises(
        errors.FitInputError, match=r"device cuda:1 is not available \(1 CUDA device\(s\) found\)"
    ):
        warp_setup.choose_device("cuda:1", 10, cuda_names=[H200], table=table)
    with pytest.raises(errors.FitInputError, match="unknown device 'gpu': use cpu, cuda or cuda:N"):
        warp_setup.choose_device("gpu", 10, cuda_names=[H200], table=table)


def test_resolve_device_keeps_its_meaning_and_follows_the_choice() -> None:
    gpus = warp_setup.cuda_device_names()  # Warp's own: none on a machine without a GPU
    assert warp_setup.resolve_device("AUTO") == ("cuda:0" if gpus else "cpu")
    for vertices in (16, 1_000_000):
        assert (
            warp_setup.resolve_device("AUTO", vertices) == warp_setup.choose_device("AUTO", vertices).device
        )
    assert warp_setup.resolve_device("cpu", 16) == "cpu"


def test_a_table_entry_without_its_measurement_is_refused(table_data: dict) -> None:
    broken = copy.deepcopy(table_data)
    del broken["gpus"][0]["measured"]
    with pytest.raises(ValueError, match=r"gpus\[0\]: it says nowhere where it was measured"):
        warp_setup.CrossoverTable.from_data(broken)
    broken = copy.deepcopy(table_data)
    broken["gpus"][1]["crossover_vertices"]["float64"] = 10**9  # beyond the sizes measured
    with pytest.raises(ValueError, match=r"crossover_vertices\[float64\] is neither null nor a count"):
        warp_setup.CrossoverTable.from_data(broken)
    broken = copy.deepcopy(table_data)
    broken["default"]["from_gpu"]["float64"] = "H200"  # not where its crossover comes from
    assert devices.crossover_table_problems(broken) == [
        "default: its float64 crossover is not that of the entry 'from_gpu' names"
    ]


def test_the_committed_table_is_valid_and_says_where_each_number_was_measured() -> None:
    path = Path(devices.CROSSOVER_TABLE)
    assert path == REPO_ROOT / "assets" / "device_crossover.json"
    data = json.loads(path.read_text())
    assert devices.crossover_table_problems(data) == []
    devices.load_crossover_table(path)
    assert data["written"]["from"] and data["written"]["host_cpu_cores"] >= 1
    for entry in data["gpus"]:
        assert entry["measured"]["source"].startswith("bench/device_crossover.py: ")
    # the default is the rule it states: per precision the largest crossover, null (never) first
    for precision, vertices in data["default"]["crossover_vertices"].items():
        measured = [
            e["crossover_vertices"][precision] for e in data["gpus"] if precision in e["crossover_vertices"]
        ]
        assert vertices == (None if None in measured else max(measured))
