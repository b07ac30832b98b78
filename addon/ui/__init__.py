"""What Blender shows: the object's fit settings, the sidebar panel, the operators, and the
material preset menus."""
