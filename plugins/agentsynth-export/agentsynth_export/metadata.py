"""What this plugin is, for the generated plugin table and `agentsynth plugins`."""

METADATA = {
    "name": "agentsynth-export",
    "kind": "exporter",
    "status": "beta",
    "capabilities": [
        "exporter:jsonl", "exporter:openai", "exporter:sharegpt", "exporter:adp", "exporter:dpo",
        "exporter:parquet", "exporter:hf",
        "importer:openai", "importer:anthropic", "importer:otel", "importer:sharegpt", "importer:adp", "importer:auto",
        "redaction (emails, API keys, bearer tokens, phone numbers, IPs)",
        "dedup (exact normalized hash + MinHash LSH, candidates verified by exact Jaccard)",
        "decontamination (n-gram overlap with a pack's tasks) and canary strings",
        "commands: agentsynth export / import / dedup / pack contamination",
    ],
}
