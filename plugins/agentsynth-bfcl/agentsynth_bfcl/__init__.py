"""agentsynth-bfcl: BFCL function-calling packs scored by an AST matcher over the calls."""
