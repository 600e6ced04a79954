"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "environment",
    "status": "alpha",
    "capabilities": ["environment:composite", "checker:composite", "checker:composite_answer", "pack:sql-python",
                     "adversarial_exploits:composite", "perturb_task:composite", "scaffold_pack:composite"],
}
