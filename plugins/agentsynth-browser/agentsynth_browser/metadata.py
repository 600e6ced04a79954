"""What ``agentsynth plugins`` and the generated plugin table say about this plugin."""

METADATA = {
    "name": "browser",
    "distribution": "agentsynth-browser",
    "kind": ["environment", "checker", "pack"],
    "status": "beta",
    "capabilities": {
        "environments": ["browser"],
        "checkers": ["page", "url", "app_db"],
        "packs": ["webshop"],
    },
    "requires": ["playwright (Python)", "a Chromium binary (Debian: apt-get install chromium)"],
}
