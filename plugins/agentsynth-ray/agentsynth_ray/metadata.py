"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "executor",
    "status": "alpha",
    "capabilities": ["executor:ray"],
}
