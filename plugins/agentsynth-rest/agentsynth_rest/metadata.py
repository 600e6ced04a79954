"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": "environment",
    "status": "alpha",
    "capabilities": ["environment:rest", "checker:http", "checker:rest_db", "pack:tickets",
                     "adversarial_exploits:rest"],
}
