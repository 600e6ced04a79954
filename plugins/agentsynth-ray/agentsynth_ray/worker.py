"""What runs on the cluster: a worker actor that plays episodes, and the broker of the run's one budget.

Both are plain classes here, turned into Ray actors by the executor (``ray.remote(...)``), so
importing this module (``agentsynth plugins`` does, through the plugin) never imports Ray.
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

from agentsynth_kernel import (
    LEDGER_KEY,
    AgentsynthError,
    BudgetExceeded,
    BudgetLedger,
    BudgetUnenforceable,
    EpisodeResult,
    Reservation,
    Usage,
    get_host,
    to_json,
)

LEDGER_SERVICE = LEDGER_KEY  # the run service whose ledger every LLM client of the run charges (client_for)


class RemoteLedger(BudgetLedger):
    """A worker's budget: every reservation and settlement goes to the driver's ledger (through the
    broker), so all workers draw on one cap, journalled in the driver's run store before any request
    leaves. The local counters only describe the cap; nothing is decided here."""

    def __init__(self, broker: Any, worker: str, usd: float | None, tokens: int | None) -> None:
        super().__init__(usd, tokens)
        self.broker, self.worker = broker, worker
        self.unsent: list[Any] = []  # settlements on their way to the broker (awaited after each episode)

    async def reserve(self, prompt_tokens: int, max_completion: int, price: tuple[float, float] | None,
                      min_completion: int = 32, model: str = "") -> Reservation:
        if not self.limited:
            return await super().reserve(prompt_tokens, max_completion, price, min_completion, model)
        answer = await self.broker.reserve.remote(self.worker, prompt_tokens, max_completion,
                                                  list(price) if price is not None else None, min_completion, model)
        if answer["error"]:
            cls = BudgetUnenforceable if answer["error"] == "unenforceable" else BudgetExceeded
            raise cls(answer["message"])
        self.in_flight += 1
        return Reservation(answer["tokens"], answer["pico"], answer["allowance"], journal_entry=answer["id"])

    def settle(self, res: Reservation, tokens: int, usd: float | None) -> None:
        if not self.limited or res.journal_entry is None:
            super().settle(res, tokens, usd)
            return
        self.in_flight -= 1
        # sent now, awaited before the episode's result leaves (settle is sync); a worker that dies
        # first is charged the reservation
        self.unsent.append(self.broker.settle.remote(res.journal_entry, tokens, usd))

    async def flush(self) -> None:
        """Every settlement made so far is in the broker's inbox (before the driver closes the run)."""
        unsent, self.unsent = self.unsent, []
        if unsent:
            await asyncio.gather(*unsent)

    def charge(self, tokens: int = 0, usd: float = 0.0) -> None:
        """Earlier sessions' spend is charged once, on the driver's ledger, not per worker."""


def _locate_pack(pack: Any, host: Any) -> Any:
    """The driver's pack, found on this node with the same content hash: at the same path (one
    machine, a shared disk, an image with the same layout) or as the same registered pack installed
    here. A different version would give different results under the same run: refused."""
    from agentsynth_kernel import content_hash, load_pack

    node = socket.gethostname()
    source = Path(pack.source)
    hashed = source.parent if source.name == "pack.yaml" else source  # what the driver's hash covers
    if hashed.exists() and Path(pack.base_dir).is_dir():
        here = content_hash(hashed)
        if here != pack.content_hash:
            raise AgentsynthError(
                f"pack {pack.id!r}: {hashed} on worker {node} has content hash {here}, the driver's has "
                f"{pack.content_hash}: install the same version of its distribution on the workers")
        return pack
    if pack.id in host.registry["pack"]:
        local = load_pack(pack.id, host=host)
        if local.content_hash != pack.content_hash:
            raise AgentsynthError(
                f"pack {pack.id!r} on worker {node} has content hash {local.content_hash}, "
                f"the driver's has {pack.content_hash}: install the same version of its distribution on the workers")
        return local
    raise AgentsynthError(
        f"pack {pack.id!r}: its directory {pack.base_dir} does not exist on worker {node} and no plugin "
        f"there registers a pack {pack.id!r}: install the pack's distribution on the workers, put it on a shared "
        f"disk at the same path, or ship it with runtime_env working_dir")


class EpisodeWorker:
    """One Ray actor: its own plugin host, the pack, and the kernel's own ``run_episode``.

    Construction never raises (Ray would turn it into an opaque dead actor): a worker that cannot
    run the pack keeps the reason, and ``ready()`` returns it to the driver.
    """

    def __init__(self, name: str, context: dict[str, Any], broker: Any) -> None:
        self.name, self.problem = name, ""
        try:
            from agentsynth_kernel import RunInfo

            self.host = get_host()
            self.pack = _locate_pack(context["pack"], self.host)
            spec = context["spec"]
            self.config = context["config"]
            self.tasks = {t.id: t for t in self.pack.tasks}
            budget = spec.budget
            limited = budget.usd is not None or budget.tokens is not None
            run_dir = context["run_dir"]
            self.run = RunInfo(context["run_id"], spec, self.pack,
                               Path(run_dir) if run_dir and Path(run_dir).is_dir() else None,
                               total=context["total"], run_hash=context["run_hash"], spent=Usage())
            if limited and broker is not None:
                self.run.services[LEDGER_SERVICE] = RemoteLedger(broker, name, budget.usd, budget.tokens)
        except Exception as exc:
            self.problem = f"{type(exc).__name__}: {exc}"

    def ready(self) -> dict[str, Any]:
        return {"problem": self.problem, "node": socket.gethostname(), "pid": os.getpid()}

    async def run_episode(self, task_id: str, trial: int, seed: int) -> bytes:
        """One episode, its result as JSON bytes (the driver stores them as they come back)."""
        from agentsynth_kernel import run_episode

        if self.problem:
            raise AgentsynthError(self.problem)
        result: EpisodeResult = await run_episode(self.host, self.pack, self.tasks[task_id], trial, seed,
                                                  self.config, self.run)
        ledger = self.run.services.get(LEDGER_SERVICE)
        if isinstance(ledger, RemoteLedger):
            await ledger.flush()
        return to_json(result)

    async def aclose(self) -> None:
        """Release run-scoped services (the LLM client's connections) before the actor goes."""
        for service in list(getattr(getattr(self, "run", None), "services", {}).values()):
            close = getattr(service, "aclose", None) or getattr(service, "close", None)
            if close is None:
                continue
            try:
                out = close()
                if asyncio.iscoroutine(out):
                    await out
            except Exception:  # a failing close must not keep the actor alive
                pass


class BudgetBroker:
    """The mailbox between workers and the driver's ledger (a driver cannot host an actor).

    Workers call ``reserve`` (answered only after the driver reserved it in its ledger, and so in
    its run store's journal) and ``settle``; the driver long-polls ``pull`` and replies with
    ``answer``.
    """

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.next_id = 0

    async def reserve(self, worker: str, prompt_tokens: int, max_completion: int, price: list[float] | None,
                      min_completion: int, model: str) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = future
        self.inbox.put_nowait({"op": "reserve", "id": rid, "worker": worker, "prompt_tokens": prompt_tokens,
                               "max_completion": max_completion, "price": price, "min_completion": min_completion,
                               "model": model})
        try:
            return await future
        finally:
            self.waiting.pop(rid, None)

    async def settle(self, rid: int, tokens: int, usd: float | None) -> None:
        self.inbox.put_nowait({"op": "settle", "id": rid, "tokens": tokens, "usd": usd})

    async def pull(self, wait: float) -> list[dict[str, Any]]:
        """Everything queued; waits up to ``wait`` seconds for the first message."""
        if self.inbox.empty():
            try:
                first = await asyncio.wait_for(self.inbox.get(), timeout=wait)
            except TimeoutError:
                return []
        else:
            first = self.inbox.get_nowait()
        out = [first]
        while not self.inbox.empty():
            out.append(self.inbox.get_nowait())
        return out

    async def answer(self, rid: int, reply: dict[str, Any]) -> bool:
        future = self.waiting.get(rid)
        if future is None or future.done():
            return False  # its worker is gone
        future.set_result(reply)
        return True
