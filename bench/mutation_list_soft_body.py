"""The soft-body model's planted bugs (see ``mutation_list.py``), and the whole list."""

from __future__ import annotations

from mutation_list import MUTATIONS as CLOTH_AND_FIT
from mutation_list import Mutation

SOFT_CORE = ("tests/core/test_soft_body_model.py", "tests/core/test_soft_body_statics.py")
SOFT_BODY = [
    Mutation(
        "soft_contact_fixed",
        "soft body: contact stiffness stays where the simulator was built (not following E)",
        "warp_core/models/soft_body/simulator.py",
        "stiffness = contact_stiffness(self.materials.mean_young_modulus(settings), self.lattice.cell_size)",
        "stiffness = self.scene.contact_stiffness",
        SOFT_CORE,
    ),
    Mutation(
        "soft_contact_in_launch_argument",
        "soft body: the contact stiffness on the particle side, a launch argument the graphs keep",
        "warp_core/models/soft_body/scene.py",
        "    model.soft_contact_ke = 0.0\n",
        "    model.soft_contact_ke = stiffness\n",
        SOFT_CORE,
    ),
    Mutation(
        "soft_shear_modulus_doubled",
        "soft body: the shear modulus without its factor 2 (twice too stiff)",
        "warp_core/models/soft_body/params.py",
        "return e / (2.0 * (1.0 + nu)), e * nu",
        "return e / (1.0 + nu), e * nu",
        SOFT_CORE,
    ),
    Mutation(
        "soft_density_ignored",
        "soft body: density does not change the node masses",
        "warp_core/models/soft_body/scene.py",
        "mass = scene.unit_mass * density",
        "mass = scene.unit_mass * 1000.0",
        SOFT_CORE,
    ),
    Mutation(
        "soft_damping_doubled",
        "soft body: Newton's k_damp twice the damping time's (tau mu instead of tau mu / 2)",
        "warp_core/models/soft_body/params.py",
        "return damping * mu / 2.0",
        "return damping * mu",
        SOFT_CORE,
    ),
    Mutation(
        "soft_shear_modulus_1pc",
        "soft body: the shear modulus 1 % high",
        "warp_core/models/soft_body/params.py",
        "return e / (2.0 * (1.0 + nu)), e * nu",
        "return 1.01 * e / (2.0 * (1.0 + nu)), e * nu",
        SOFT_CORE,
    ),
    Mutation(
        "soft_lame_lambda_1pc",
        "soft body: Lame's lambda 1 % high",
        "warp_core/models/soft_body/params.py",
        "e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))",
        "1.01 * e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))",
        SOFT_CORE,
    ),
    Mutation(
        "soft_damping_time_1pc",
        "soft body: Newton's k_damp 1 % high (the damping time read 1 % long)",
        "warp_core/models/soft_body/params.py",
        "return damping * mu / 2.0",
        "return 1.01 * damping * mu / 2.0",
        SOFT_CORE,
    ),
    Mutation(
        "soft_pins_frozen",
        "soft body: pinned nodes stay at the frame's start goal",
        "warp_core/models/soft_body/kernels.py",
        "b = goal_end[k]",
        "b = goal_start[k]",
        SOFT_CORE,
    ),
]

MUTATIONS: list[Mutation] = CLOTH_AND_FIT + SOFT_BODY
