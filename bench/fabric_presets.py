"""Build the built-in presets of measured fabrics in ``assets/presets/`` from published lab
numbers, through the fabric fit's virtual test rigs (``warp_core.rigs.lab_fit``).

    python bench/fabric_presets.py [--edge-mm 10]

The numbers are rows of the 618-fabric dataset of Feng, Huang, Xu and Wang, "Learning-Based
Bending Stiffness Parameter Estimation by a Drape Tester", ACM Transactions on Graphics 41(6)
(SIGGRAPH Asia 2022), measured by cantilever tests and published with the paper
(github.com/DrapeTester/ClothDrapeTester, ``dataset/dataset.csv``): each fabric's areal
density (kg/m^2) and the linear (small-curvature) bending stiffness per width along the warp
and the weft (N m, given there times 1e9). Blender's bending is one value for both
directions, so a preset takes their geometric mean G; its cantilever bending length is
``c = (G / (rho g)) ** (1/3)`` (``G = w c^3``, ASTM D1388's definition). The fit then finds
the vertex mass and bending that read the weight and that bending length on a mesh of
``--edge-mm`` edges; the preset records the dataset row, the numbers and the rig's reading.
"""

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from warp_core.io import atomic_write_text  # noqa: E402
from warp_core.presets import BUILTIN_DIR  # noqa: E402
from warp_core.rigs import FabricNumbers, fabric_preset, fit_fabric  # noqa: E402

GRAVITY = 9.81
CITATION = (
    "Feng, Huang, Xu, Wang: Learning-Based Bending Stiffness Parameter Estimation by a Drape Tester, "
    "ACM TOG 41(6), SIGGRAPH Asia 2022; dataset github.com/DrapeTester/ClothDrapeTester dataset.csv"
)
# file stem: (preset name, dataset row (1 = the first after the header), areal density kg/m^2,
# linear bending stiffness warp and weft in N m x 1e9), spanning the dataset's weights
ROWS = {
    "lab_sheer_22_gsm": ("Lab Sheer 22 gsm", 9, 0.0224, 866.3, 1141.2),
    "lab_light_67_gsm": ("Lab Light 67 gsm", 1, 0.0673, 1779.9, 3076.2),
    "lab_soft_146_gsm": ("Lab Soft 146 gsm", 10, 0.1462, 3436.1, 2478.2),
    "lab_crisp_189_gsm": ("Lab Crisp 189 gsm", 8, 0.1893, 53512.5, 53947.7),
    "lab_medium_311_gsm": ("Lab Medium 311 gsm", 11, 0.3111, 60665.3, 42846.9),
    "lab_heavy_692_gsm": ("Lab Heavy 692 gsm", 35, 0.6918, 164513.1, 102239.6),
}


def bending_length_mm(density_kg_m2: float, stiffness_nm_1e9: float) -> float:
    """Peirce's bending length (mm) of a fabric of flexural rigidity ``G`` (N m per metre of
    width) and weight ``rho g``: ``c = (G / (rho g)) ** (1/3)``."""
    return 1e3 * (stiffness_nm_1e9 * 1e-9 / (density_kg_m2 * GRAVITY)) ** (1.0 / 3.0)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--edge-mm", type=float, default=10.0, help="the mesh edge the presets are for")
    args = parser.parse_args()
    failed = 0
    for stem, (name, row, density, warp, weft) in ROWS.items():
        stiffness = math.sqrt(warp * weft)
        numbers = FabricNumbers(
            weight_gsm=1e3 * density, bending_length_mm=bending_length_mm(density, stiffness)
        )
        result = fit_fabric(numbers, args.edge_mm * 1e-3)
        source = (
            f"{CITATION}, row {row}: {density} kg/m², bending stiffness warp {warp} and weft {weft} "
            f"(N m x 1e9); bending length {bending_length_mm(density, warp):.1f} mm warp, "
            f"{bending_length_mm(density, weft):.1f} mm weft, {numbers.bending_length_mm:.1f} mm of their "
            "geometric mean"
        )
        preset = fabric_preset(result, name=name, source=source)
        preset["notes"] = f"{preset['notes']}\nNumbers from {source}."
        atomic_write_text(
            BUILTIN_DIR / f"{stem}.json", json.dumps(preset, indent=2, ensure_ascii=False) + "\n"
        )
        reading = result.rigs[0]
        print(
            f"{stem}: {result.outcome}; weight {numbers.weight_gsm:g} g/m², bending length "
            f"{numbers.bending_length_mm:.2f} mm, the rig reads {reading.reading:.2f} mm; mass "
            f"{result.settings.mass:.4g}, bending {result.settings.bending_stiffness:.4g} "
            f"({result.seconds:.1f} s)",
            flush=True,
        )
        failed += result.outcome != "matched"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
