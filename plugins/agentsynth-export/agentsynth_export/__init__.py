"""agentsynth-export: training-data exporters, trace importers, redaction, dedup and decontamination."""

__version__ = "0.1.0"
