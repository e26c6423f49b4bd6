"""A stand-in for TensorFlow (ours): ``tfmesos.server`` imports it, and uses it only for tasks without a command."""
