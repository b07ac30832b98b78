"""The Blender side of each material model: where its settings live in the scene."""
