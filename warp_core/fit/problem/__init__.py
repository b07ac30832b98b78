"""What a fit is asked to do: the problem (geometry, model settings, targets, free parameters),
the run settings, the parameter spec in log space, and the problem file format."""
