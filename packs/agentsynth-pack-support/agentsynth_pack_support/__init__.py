"""The support pack: pack.yaml, oracle.py and schema.sql live next to this file (no code)."""
