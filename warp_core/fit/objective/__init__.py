"""What the optimizers minimise: a model's rollouts compared with a target kind, as residuals,
Jacobians of forward tangents and tape gradients."""
