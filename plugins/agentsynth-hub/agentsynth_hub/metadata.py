"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "command",
    "status": "alpha",
    "capabilities": ["command:hub"],
}
