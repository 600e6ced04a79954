"""The agentsynth-export plugin: exporters, importers and the export/import/dedup commands."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl


@hookimpl
def register_exporters(register: Any) -> None:
    from .exporters import EXPORTERS

    for name, (cls, description) in EXPORTERS.items():
        register(name, cls, description=description)


@hookimpl
def register_importers(register: Any) -> None:
    from .importers import (
        ADPImporter,
        AnthropicImporter,
        AutoImporter,
        OpenAIImporter,
        OtelImporter,
        ShareGPTImporter,
    )

    register("openai", OpenAIImporter, description="OpenAI chat logs with tool_calls (JSONL or JSON array)")
    register("anthropic", AnthropicImporter, description="Anthropic Messages with tool_use/tool_result blocks")
    register("otel", OtelImporter, description="OpenTelemetry GenAI spans (OTLP JSON / console exporter), one trajectory per trace")
    register("sharegpt", ShareGPTImporter, description="ShareGPT conversations (Hermes <tool_call> blocks, LLaMA-Factory function_call turns)")
    register("adp", ADPImporter, description="Agent Data Protocol trajectories")
    register("auto", AutoImporter, description="Detect openai / anthropic / otel / sharegpt / adp from the first record")


@hookimpl
def register_commands(cli: Any) -> None:
    import click

    from .cli import contamination_cmd, dedup_cmd, export_cmd, import_cmd

    for name, command in (("export", export_cmd), ("import", import_cmd), ("dedup", dedup_cmd)):
        if name not in cli.commands:
            cli.add_command(command, name)
    # `agentsynth pack contamination`: the kernel owns the pack group, this plugin adds a command to it
    pack_group = cli.commands.get("pack") or cli.get_command(None, "pack")
    if isinstance(pack_group, click.Group) and "contamination" not in pack_group.commands:
        pack_group.add_command(contamination_cmd, "contamination")
