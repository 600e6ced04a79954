"""``--json`` goes through the kernel's report writer: a key a provider echoes back is masked."""

from __future__ import annotations

import json

from agentsynth_kernel.cli import main
from conftest import policy, status

LEAKED = "sk-synthtest0123456789abcdef"


def test_json_report_masks_a_key_in_a_provider_error(llm, pack_dir, tmp_path, monkeypatch, capsys):
    llm.router.routes["challenger"] = lambda r: status(401, {"error": {"message": f"Incorrect API key: {LEAKED}"}})
    monkeypatch.chdir(tmp_path)
    args = ["synth", str(pack_dir), "-g", "challenger", "-p", "model=openai/challenger", "-p",
            f"api_base={llm.base_url}", "-p", f"strong=[{json.dumps(policy(llm, 'good'))}]", "-p", "n=1",
            "--run-dir", "rd", "--no-cache", "-q"]
    for target in ("report.json", "-"):
        try:
            code = main([*args, "--json", target])
        except SystemExit as exc:
            code = exc.code
        assert code == 4, "the provider failed: the item is not finished"
        text = (tmp_path / "report.json").read_text() if target != "-" else capsys.readouterr().out
        assert LEAKED not in text
        data = json.loads(text)
        assert data["incomplete_items"] == 1 and "<redacted>" in data["errors"][0], data["errors"]
