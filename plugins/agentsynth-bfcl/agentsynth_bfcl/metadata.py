"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "environment",
    "status": "alpha",
    "capabilities": ["environment:bfcl", "checker:bfcl_ast", "pack:bfcl:<category>", "adversarial_exploits:bfcl",
                     "command:bfcl"],
}
