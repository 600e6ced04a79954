"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "environment",
    "status": "alpha",
    "capabilities": ["environment:python", "checker:python_file", "checker:python_value", "checker:python_stdout",
                     "pack:python-data", "adversarial_exploits:python"],
}
