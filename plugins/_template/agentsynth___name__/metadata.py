"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "environment",
    "status": "alpha",
    "capabilities": ["environment:__name__", "checker:__name___note_exists", "pack:__name__-demo"],
}
