"""The vocabulary every stage shares: the model's values, the error classes, quantities, controller references,
the per-alert outcome and the reactor's own metrics. Imports nothing else of the reactor."""
