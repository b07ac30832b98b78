"""Every property of Blender 5.0's ``ClothSettings``, ``ClothCollisionSettings``,
``EffectorWeights`` and a collider's ``CollisionSettings`` (``Object.collision``), sorted
into what the ``blender_cloth`` model simulates, what the input check refuses
(:mod:`.unmodeled`) and what cannot change the cloth's motion.

A test walks the RNA properties and fails on any that is in none of the lists, so a setting
a new Blender adds is decided on instead of being silently ignored by the fit.
"""

from __future__ import annotations

# Read by the model: ClothParams fields, the pin, stiffness and shrinking groups, the
# gravity weight, and the object collisions (colliders and the cloth's collision settings).
SIMULATED: dict[str, tuple[str, ...]] = {
    "ClothSettings": (
        "tension_stiffness",
        "compression_stiffness",
        "shear_stiffness",
        "bending_stiffness",
        "tension_damping",
        "compression_damping",
        "shear_damping",
        "bending_damping",
        "air_damping",
        "mass",
        "pin_stiffness",
        "goal_spring",  # the same DNA field as pin_stiffness
        "goal_friction",
        "quality",
        "time_scale",
        "bending_model",
        "vertex_group_mass",
        "tension_stiffness_max",
        "compression_stiffness_max",
        "shear_stiffness_max",
        "bending_stiffness_max",
        "vertex_group_structural_stiffness",
        "vertex_group_shear_stiffness",
        "vertex_group_bending",
        "shrink_min",
        "shrink_max",
        "vertex_group_shrink",
        "use_sewing_springs",  # with the angular bending model; with the linear one refused
        "sewing_force_max",
        "use_dynamic_mesh",  # the rest shape follows the input mesh, sampled every frame
        "use_pressure",  # on triangles and quads, without fluid density or a pressure group
        "use_pressure_volume",
        "uniform_pressure_force",
        "target_volume",
        "pressure_factor",
        "effector_weights",  # its gravity weight; the other weights are checked below
    ),
    "ClothCollisionSettings": (
        "use_collision",
        "distance_min",
        "collision_quality",
        "impulse_clamp",
        "collection",
        "vertex_group_object_collisions",
        # self collisions (self_collision.py), against Blender's in tests/blender/test_self_collision.py
        "use_self_collision",
        "self_distance_min",
        "self_friction",
        "self_impulse_clamp",
        "vertex_group_self_collisions",
    ),
    # a collider's settings that act on cloth
    "CollisionSettings": ("use", "thickness_outer", "cloth_friction", "use_culling", "use_normal"),
    # all, force and wind weigh the Wind and Force fields the model simulates
    # (fields.py); a field the model does not simulate is refused by name
    "EffectorWeights": ("gravity", "all", "force", "wind"),
}

# Refused by the input check when they change the motion (each needs --allow-unmodeled).
# Settings that only act through a refused switch are listed with that switch.
REFUSED: dict[str, tuple[str, ...]] = {
    "ClothSettings": (
        "fluid_density",  # with pressure on
        "vertex_group_pressure",  # with pressure on
        "use_internal_springs",
        "internal_spring_normal_check",
        "internal_spring_max_length",
        "internal_spring_max_diversion",
        "internal_tension_stiffness",
        "internal_tension_stiffness_max",
        "internal_compression_stiffness",
        "internal_compression_stiffness_max",
        "vertex_group_intern",
        "rest_shape_key",
        "goal_default",
    ),
    "ClothCollisionSettings": (),
    "CollisionSettings": (),
    "EffectorWeights": (
        "vortex",
        "magnetic",
        "curve_guide",
        "texture",
        "harmonic",
        "charge",
        "lennardjones",
        "boid",
        "turbulence",
        "drag",
        "smokeflow",
        "collection",
    ),
}

# Cannot change a cloth's motion: property -> why, in a word.
IRRELEVANT: dict[str, dict[str, str]] = {
    "ClothSettings": {
        "gravity": "unused",  # the solver reads the scene's gravity
        "goal_min": "unused",  # the cloth solver ignores the goal range
        "goal_max": "unused",
        "internal_friction": "hair",
        "collider_friction": "hair",
        "density_target": "hair",
        "density_strength": "hair",
        "voxel_cell_size": "hair",
    },
    # object collisions read the collider's friction; nothing reads these
    "ClothCollisionSettings": {"friction": "unused", "damping": "unused"},
    # for particles and soft bodies; absorption weakens fields with absorption (refused)
    "CollisionSettings": {
        "thickness_inner": "softbody",
        "damping": "softbody",
        "damping_factor": "particles",
        "damping_random": "particles",
        "friction_factor": "particles",
        "friction_random": "particles",
        "permeability": "particles",
        "stickiness": "particles",
        "use_particle_kill": "particles",
        "absorption": "fields",
    },
    "EffectorWeights": {"apply_to_hair_growing": "hair"},
}

# Field types of force fields -> their EffectorWeights property.
FIELD_WEIGHTS: dict[str, str] = {
    "BOID": "boid",
    "CHARGE": "charge",
    "GUIDE": "curve_guide",
    "DRAG": "drag",
    "FLUID_FLOW": "smokeflow",
    "FORCE": "force",
    "HARMONIC": "harmonic",
    "LENNARDJ": "lennardjones",
    "MAGNET": "magnetic",
    "TEXTURE": "texture",
    "TURBULENCE": "turbulence",
    "VORTEX": "vortex",
    "WIND": "wind",
}
