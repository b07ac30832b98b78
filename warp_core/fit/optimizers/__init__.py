"""The optimizers, which see only an objective's values, residuals, Jacobians and gradients in
log space: Levenberg-Marquardt's trust region, L-BFGS, Adam, and the global phase around them."""
