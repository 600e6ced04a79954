"""The built-in executor: episodes in this process, on the engine's event loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..episode import EpisodeConfig, run_episode

if TYPE_CHECKING:
    from ..plugins import PluginHost
    from ..records import EpisodeResult
    from ..spec import Pack, Task
    from ..types import RunInfo


class LocalExecutor:
    """The default: ``run_episode`` right here, ``concurrency`` episodes in flight (the spec's)."""

    concurrency: int | None = None

    async def run_episode(self, host: PluginHost, pack: Pack, task: Task, trial: int, seed: int,
                          config: EpisodeConfig, run: RunInfo) -> EpisodeResult:
        return await run_episode(host, pack, task, trial, seed, config, run)
