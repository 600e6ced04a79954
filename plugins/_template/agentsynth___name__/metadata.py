"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "environment",
    "status": "alpha",
    "capabilities": ["environment:__name__"],
}
