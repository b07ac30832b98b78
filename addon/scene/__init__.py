"""The scene side of a fit: reading the object and its targets, the checks on a request,
writing results back, and the bake."""
