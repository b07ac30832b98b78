"""The fabric tests' readings (``warp_core.rigs.readings``) on shapes whose readings are known:
flat, conical and folded discs for the drape coefficient and node count, a circular arc for
the cantilever's tip angle, Peirce's relation at the standards' 41.5 deg."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warp_core.mesh import ClothMesh
from warp_core.rigs import bending_length, drape_reading, flexural_rigidity, tip_angle

SPECIMEN, SUPPORT = 0.15, 0.09  # Cusick: a 30 cm specimen on an 18 cm support
SECTORS = 180


def disc(outline, sectors: int = SECTORS, rings: int = 30, centre=(0.0, 0.0)):
    """A disc mesh of the specimen's radius (rings x sectors, a centre vertex), its rest
    polar coordinates (rho, alpha) moved by ``outline(rho, alpha) -> projected radius``; z
    falls with the overhang (the shadow does not see it): its positions and edges."""
    rho = np.repeat(np.linspace(SPECIMEN / rings, SPECIMEN, rings), sectors)
    alpha = np.tile(2.0 * math.pi * np.arange(sectors) / sectors, rings)
    r = outline(rho, alpha)
    z = -np.maximum(rho - SUPPORT, 0.0)
    vertices = np.concatenate(
        [[[0.0, 0.0, 0.0]], np.stack([r * np.cos(alpha), r * np.sin(alpha), z], axis=1)]
    )
    vertices[:, :2] += centre
    triangles = [[0, 1 + k, 1 + (k + 1) % sectors] for k in range(sectors)]
    for ring in range(rings - 1):
        for k in range(sectors):
            a, b = 1 + ring * sectors + k, 1 + ring * sectors + (k + 1) % sectors
            triangles += [[a, b, b + sectors], [a, b + sectors, a + sectors]]
    return vertices, ClothMesh.from_polygons(vertices, triangles).edges


def drape_coefficient(area: float) -> float:
    return (area - math.pi * SUPPORT**2) / (math.pi * (SPECIMEN**2 - SUPPORT**2))


def polygon_area(radius: float, sides: int = SECTORS) -> float:
    return 0.5 * sides * radius**2 * math.sin(2.0 * math.pi / sides)


def hang(rho: np.ndarray, share) -> np.ndarray:
    """The projected radius of a ring at rest radius ``rho`` whose overhang shows ``share``."""
    return np.where(rho > SUPPORT, SUPPORT + (rho - SUPPORT) * share, rho)


def test_a_flat_specimen_reads_one_and_no_nodes() -> None:
    vertices, edges = disc(lambda rho, alpha: rho)
    reading = drape_reading(vertices, edges, np.zeros(2), SUPPORT, SPECIMEN)
    # the specimen's outline is a 180-gon: its area, not the circle's (2e-4 more)
    assert reading.shadow_area_m2 == pytest.approx(polygon_area(SPECIMEN), rel=5e-5)
    assert reading.coefficient == pytest.approx(drape_coefficient(polygon_area(SPECIMEN)), abs=1e-5)
    assert reading.nodes == 0


@pytest.mark.parametrize("angle_deg", [30.0, 60.0, 85.0])
def test_a_conical_drape_reads_its_projected_ring(angle_deg: float) -> None:
    """Every overhanging ring tilted down by the same angle: the shadow is a disc of radius
    support + overhang * cos(angle)."""
    share = math.cos(math.radians(angle_deg))
    vertices, edges = disc(lambda rho, alpha: hang(rho, share))
    reading = drape_reading(vertices, edges, np.zeros(2), SUPPORT, SPECIMEN)
    expected = drape_coefficient(polygon_area(SUPPORT + (SPECIMEN - SUPPORT) * share))
    assert reading.coefficient == pytest.approx(expected, abs=1e-4)
    assert reading.nodes == 0


@pytest.mark.parametrize("folds", [4, 6, 9])
def test_a_folded_drape_reads_its_area_and_counts_its_nodes(folds: int) -> None:
    """The overhang's projection ``0.55 + 0.25 cos(n alpha)``: the shadow's area is
    pi (A^2 + B^2 / 2) with A = support + 0.55 overhang, B = 0.25 overhang; n nodes. Off the
    origin, as a support rarely is."""
    centre = np.array([0.31, -0.12])
    vertices, edges = disc(lambda rho, alpha: hang(rho, 0.55 + 0.25 * np.cos(folds * alpha)), centre=centre)
    reading = drape_reading(vertices, edges, centre, SUPPORT, SPECIMEN)
    a, b = SUPPORT + 0.55 * (SPECIMEN - SUPPORT), 0.25 * (SPECIMEN - SUPPORT)
    assert reading.coefficient == pytest.approx(drape_coefficient(math.pi * (a**2 + 0.5 * b**2)), abs=2e-3)
    assert reading.nodes == folds


def test_drape_refuses_a_support_not_inside_the_specimen() -> None:
    vertices, edges = disc(lambda rho, alpha: rho)
    with pytest.raises(ValueError, match="support radius"):
        drape_reading(vertices, edges, np.zeros(2), SPECIMEN, SUPPORT)


@pytest.mark.parametrize("turn_deg", [40.0, 83.0, 120.0])
def test_the_tip_angle_of_a_circular_arc_is_half_its_turn(turn_deg: float) -> None:
    """A strip leaving the edge level and bending on a circle through ``turn``: its chord
    falls by half the turn."""
    radius, turn = 0.07, math.radians(turn_deg)
    s = np.linspace(0.0, turn, 50)
    edge = np.array([0.2, 0.1, 0.5])
    arc = edge + np.stack([radius * np.sin(s), np.zeros_like(s), -radius * (1.0 - np.cos(s))], axis=1)
    assert tip_angle(arc, edge) == pytest.approx(0.5 * turn, rel=1e-12)
    # gravity along -y instead of -z
    turned = edge + (arc - edge)[:, [0, 2, 1]]
    assert tip_angle(turned, edge, down=np.array([0.0, -1.0, 0.0])) == pytest.approx(0.5 * turn, rel=1e-12)


def test_peirce_gives_half_the_overhang_at_the_standards_angle() -> None:
    """ASTM D1388 reads the bending length as half the overhang at 41.5 deg: Peirce's
    relation gives 0.509 of it there; it grows with the overhang and falls with the angle."""
    assert bending_length(0.05, math.radians(41.5)) == pytest.approx(0.025, rel=0.02)
    assert bending_length(0.10, math.radians(41.5)) == pytest.approx(
        2.0 * bending_length(0.05, math.radians(41.5))
    )
    assert bending_length(0.05, math.radians(30.0)) > bending_length(0.05, math.radians(50.0))
    with pytest.raises(ValueError, match="tip angle"):
        bending_length(0.05, math.radians(95.0))


def test_flexural_rigidity_is_weight_times_the_cubed_bending_length() -> None:
    # 200 g/m^2 at c = 2 cm: 1.962 N/m^2 * 8e-6 m^3
    assert flexural_rigidity(0.02, 200.0) == pytest.approx(1.962 * 8e-6, rel=1e-12)
