"""The batch command: ``batch.py``, ``blender --command fit_to_target`` and
``blender -b --python batch.py`` all run :func:`.command.main`."""
