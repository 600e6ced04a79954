"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "generator",
    "status": "alpha",
    "capabilities": ["generator:generate", "command:generate"],
}
