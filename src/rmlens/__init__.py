"""rmlens: train reward models on preference data and audit what they learn."""

__version__ = "0.1.0"
