"""What a fit found and how far to trust it: the outcome, identifiability, the contact probe,
the result and its report."""
