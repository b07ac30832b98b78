"""Every tet's material from the soft body's settings and its painted maps, and the chain
rule back from the tets' (k_mu, k_lambda, k_damp) to the settings and the maps.

Two maps vary the material over the body (``MAP_KINDS``): ``stiffness`` blends Young's
modulus between ``young_modulus`` (weight 0) and ``young_modulus_max`` (weight 1), and
``damping`` blends the damping time between ``damping`` and ``damping_max``, as Blender's
cloth blends a stiffness towards its Max through a vertex group. The weights are painted on
the surface mesh's vertices; a tet takes the inverse-distance blend of the weights of the
``NEAREST_VERTICES`` mesh vertices nearest its centroid (:class:`TetBlend`), so a region
painted on the surface fills the body under it. The Poisson ratio and the density stay one
value. The ground's contact stiffness follows the mean Young's modulus over the tets
(``scene.contact_stiffness``: the uniform body's, unchanged without maps).

Made and read by the simulator (materials on every change, the map gradients after a
backward pass) and the adjoint (:func:`parameter_gradient`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .params import SoftBodyParams, lame_parameters, viscosity

__all__ = [
    "MAP_FIELDS",
    "MAP_KINDS",
    "NEAREST_VERTICES",
    "MaterialGradient",
    "MaterialMaps",
    "TetBlend",
    "parameter_gradient",
    "tet_materials",
    "tet_values",
]

# map kind -> the mesh field holding its painted weights (``ClothMesh``)
MAP_FIELDS: dict[str, str] = {"stiffness": "young_modulus_weight", "damping": "damping_weight"}
MAP_KINDS: tuple[str, ...] = tuple(MAP_FIELDS)
# mesh vertices a tet's weight blends: enough that a tet between two painted regions takes
# a share of each, few enough that a region's border stays within a cell or two
NEAREST_VERTICES = 4
# tets per block of the nearest-vertex search (bounds its memory at 8 MB per 1,000 vertices)
_BLOCK = 1024


@dataclass(frozen=True)
class TetBlend:
    """Each tet's weight as a blend of mesh vertices' weights: ``w_t = sum_k share[t, k] *
    w[vertex[t, k]]``. Made once per simulator from its lattice and mesh."""

    vertex: np.ndarray  # (T, K) int64
    share: np.ndarray  # (T, K) float64, rows sum to 1

    @classmethod
    def nearest(cls, tet_centroids: np.ndarray, vertices: np.ndarray, k: int = NEAREST_VERTICES) -> TetBlend:
        """Inverse-distance shares of the ``k`` mesh vertices nearest each centroid (a vertex
        at a centroid takes it whole)."""
        vertices = np.asarray(vertices, dtype=np.float64)
        k = min(k, len(vertices))
        index = np.empty((len(tet_centroids), k), dtype=np.int64)
        distance = np.empty((len(tet_centroids), k))
        for start in range(0, len(tet_centroids), _BLOCK):
            c = tet_centroids[start : start + _BLOCK]
            d2 = ((c[:, None, :] - vertices[None, :, :]) ** 2).sum(axis=2)
            near = (
                np.argpartition(d2, k - 1, axis=1)[:, :k]
                if k < len(vertices)
                else np.tile(np.arange(k), (len(c), 1))
            )
            index[start : start + len(c)] = near
            distance[start : start + len(c)] = np.sqrt(np.take_along_axis(d2, near, axis=1))
        scale = max(float(np.ptp(vertices, axis=0).max()), 1e-300)
        inverse = 1.0 / np.maximum(distance, 1e-9 * scale)
        return cls(index, inverse / inverse.sum(axis=1, keepdims=True))

    def tets(self, vertex_weights: np.ndarray) -> np.ndarray:
        """(T,) tet weights from (N,) vertex weights."""
        return np.einsum("tk,tk->t", self.share, np.asarray(vertex_weights, dtype=np.float64)[self.vertex])

    def vertices(self, tet_values: np.ndarray, vertex_count: int) -> np.ndarray:
        """The transpose: (N,) sums of each vertex's shares of (T,) tet values (a gradient)."""
        out = np.zeros(vertex_count)
        np.add.at(out, self.vertex.ravel(), (self.share * np.asarray(tet_values)[:, None]).ravel())
        return out


def tet_values(
    settings: SoftBodyParams, tet_weights: Mapping[str, np.ndarray], tets: int
) -> dict[str, np.ndarray]:
    """Each tet's Young's modulus and damping time ((T,) each) at ``settings``, the maps'
    tet weights blending base to max (a kind without weights: the base everywhere)."""
    out = {}
    for kind, base, top in (
        ("stiffness", settings.young_modulus, settings.young_modulus_max),
        ("damping", settings.damping, settings.damping_max),
    ):
        w = tet_weights.get(kind)
        out[kind] = np.full(tets, float(base)) if w is None else float(base) + w * (float(top) - float(base))
    return out


def tet_materials(settings: SoftBodyParams, values: Mapping[str, np.ndarray]) -> np.ndarray:
    """(T, 3) Newton's (k_mu, k_lambda, k_damp) of every tet from :func:`tet_values`
    (``k_damp = tau * mu / 2``, see ``scene``)."""
    mu, lam = lame_parameters(values["stiffness"], float(settings.poisson_ratio))
    return np.stack([mu, lam, viscosity(values["damping"], mu)], axis=1)


@dataclass
class MaterialGradient:
    """The loss's derivatives by the soft body's settings and by each tet's Young's modulus
    and damping time: made by :func:`parameter_gradient`, read by the adjoint (settings)
    and the simulator (the maps' vertex gradients)."""

    parameters: dict[str, float]  # every PARAMETER_NAMES entry but density
    per_tet: dict[str, np.ndarray]  # "stiffness": d loss / d E_t, "damping": d loss / d tau_t


def parameter_gradient(
    settings: SoftBodyParams,
    tet_weights: Mapping[str, np.ndarray],
    materials_bar: np.ndarray,
    contact_bar: float = 0.0,
) -> MaterialGradient:
    """Chain d loss / d (k_mu, k_lambda, k_damp) of every tet ((T, 3)) and d loss / d log of
    the contact stiffness (``contact_bar``, the contacts' stiffness and damping scaled
    together) to the settings and to each tet's E and tau."""
    tets = len(materials_bar)
    values = tet_values(settings, tet_weights, tets)
    e, tau, nu = values["stiffness"], values["damping"], float(settings.poisson_ratio)
    mu_bar, lam_bar, damp_bar = (materials_bar[:, k] for k in range(3))
    denominator = (1.0 + nu) * (1.0 - 2.0 * nu)
    dmu_de, dlam_de = 1.0 / (2.0 * (1.0 + nu)), nu / denominator
    # the contact stiffness is proportional to the tets' mean E
    e_bar = (
        mu_bar * dmu_de + lam_bar * dlam_de + damp_bar * 0.5 * tau * dmu_de + contact_bar / (tets * e.mean())
    )
    tau_bar = damp_bar * 0.5 * e * dmu_de
    dmu_dnu, dlam_dnu = -e / (2.0 * (1.0 + nu) ** 2), e * (1.0 + 2.0 * nu**2) / denominator**2
    nu_bar = float(np.sum(mu_bar * dmu_dnu + lam_bar * dlam_dnu + damp_bar * 0.5 * tau * dmu_dnu))
    w_e = tet_weights.get("stiffness", np.zeros(tets))
    w_tau = tet_weights.get("damping", np.zeros(tets))
    parameters = {
        "young_modulus": float(e_bar @ (1.0 - w_e)),
        "young_modulus_max": float(e_bar @ w_e),
        "poisson_ratio": nu_bar,
        "damping": float(tau_bar @ (1.0 - w_tau)),
        "damping_max": float(tau_bar @ w_tau),
    }
    return MaterialGradient(parameters, {"stiffness": e_bar, "damping": tau_bar})


class MaterialMaps:
    """One simulator's painted maps: the weights per mesh vertex and per tet, which maps a
    backward pass reports, and their last gradients. Made by the simulator from its mesh
    (``ClothMesh.young_modulus_weight`` / ``damping_weight``); changed by ``set_maps``; read
    by the adjoint (:meth:`keep_gradient`) and the simulator's ``map_gradients``."""

    def __init__(self, vertices: np.ndarray, tet_centroids: np.ndarray) -> None:
        self._vertices = np.asarray(vertices, dtype=np.float64)
        self._centroids = np.asarray(tet_centroids, dtype=np.float64)
        self._blend: TetBlend | None = None  # found when a map is first painted
        self.weights: dict[str, np.ndarray] = {}  # kind -> (N,)
        self.tet_weights: dict[str, np.ndarray] = {}  # kind -> (T,)
        self.recorded: tuple[str, ...] = ()
        self.gradients: dict[str, np.ndarray] = {}  # kind -> d loss / d weight (N,)

    @property
    def vertex_count(self) -> int:
        return len(self._vertices)

    @property
    def tet_count(self) -> int:
        return len(self._centroids)

    @property
    def blend(self) -> TetBlend:
        if self._blend is None:
            self._blend = TetBlend.nearest(self._centroids, self._vertices)
        return self._blend

    def paint(self, maps: Mapping[str, np.ndarray]) -> None:
        """New weights (kind -> (N,) in [0, 1]); ValueError naming a bad one."""
        checked = {}
        for kind, w in maps.items():
            if kind not in MAP_FIELDS:
                raise ValueError(f"the soft body has no {kind!r} map (its maps: {', '.join(MAP_KINDS)})")
            w = np.asarray(w, dtype=np.float64).ravel()
            if w.shape != (self.vertex_count,) or not np.isfinite(w).all() or w.min() < 0.0 or w.max() > 1.0:
                raise ValueError(
                    f"the {kind} map needs one weight in [0, 1] per vertex ({self.vertex_count})"
                )
            checked[kind] = w
        for kind, w in checked.items():
            self.weights[kind] = w
            self.tet_weights[kind] = self.blend.tets(w)

    def record(self, kinds: tuple[str, ...] | list[str]) -> None:
        unknown = [k for k in kinds if k not in MAP_FIELDS]
        if unknown:
            raise ValueError(f"the soft body has no {unknown[0]!r} map (its maps: {', '.join(MAP_KINDS)})")
        self.recorded = tuple(kinds)

    def values(self, settings: SoftBodyParams) -> dict[str, np.ndarray]:
        return tet_values(settings, self.tet_weights, self.tet_count)

    def materials(self, settings: SoftBodyParams) -> np.ndarray:
        return tet_materials(settings, self.values(settings))

    def materials_with(
        self, settings: SoftBodyParams, weights: Mapping[str, np.ndarray]
    ) -> tuple[np.ndarray, float]:
        """(T, 3) materials and the tets' mean E (:meth:`mean_young_modulus`) at ``settings``
        with these vertex weights (kind -> (N,)) in place of the painted ones, unchecked (a
        weight a hair outside [0, 1] is a difference's side): the tangents' differences."""
        tet_weights = {**self.tet_weights, **{k: self.blend.tets(w) for k, w in weights.items()}}
        values = tet_values(settings, tet_weights, self.tet_count)
        mean = (
            float(values["stiffness"].mean()) if "stiffness" in tet_weights else float(settings.young_modulus)
        )
        return tet_materials(settings, values), mean

    def mean_young_modulus(self, settings: SoftBodyParams) -> float:
        """What the contact stiffness follows: the tets' mean E (the base, exactly, without
        a stiffness map)."""
        if "stiffness" not in self.tet_weights:
            return float(settings.young_modulus)
        return float(self.values(settings)["stiffness"].mean())

    def keep_gradient(self, settings: SoftBodyParams, per_tet: Mapping[str, np.ndarray]) -> None:
        """Each recorded map's d loss / d vertex weight from the per-tet gradient of E and
        tau (``MaterialGradient.per_tet``): a weight moves its tets' value by max - base."""
        spans = {
            "stiffness": float(settings.young_modulus_max) - float(settings.young_modulus),
            "damping": float(settings.damping_max) - float(settings.damping),
        }
        self.gradients = {
            kind: self.blend.vertices(per_tet[kind] * spans[kind], self.vertex_count)
            for kind in self.recorded
        }
