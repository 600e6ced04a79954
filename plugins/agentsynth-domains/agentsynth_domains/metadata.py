"""What this plugin is, for the generated plugin table (plugins/README.md) and `agentsynth plugins`."""

METADATA = {
    "kind": ["domain", "generator", "command"],
    "status": "alpha",
    "capabilities": ["domain:math", "domain:docs_qa", "generator:autosynth", "command:init-domain",
                     "command:metaopt"],
}
