"""The ``ray`` executor: the engine's episodes played by worker actors on a Ray cluster.

The driver (``agentsynth run/bench/resume``) keeps the plan, the run store, budget stops, hooks and
resume; each episode is sent to the least busy worker actor, which builds the world on its node and
runs the kernel's own ``run_episode``, and its result comes back as JSON, awaited on its own (never
collected all at once), and is stored by the engine as it arrives. A worker that dies takes only its
in-flight episodes with it: each is played once more on a fresh worker (``retries: 1``), then fails
as an ``environment`` error. With a budget, every worker reserves on the driver's ledger through a
broker actor, so the cap and its kill-safe journal are the same as for a local run.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Annotated, Any

from agentsynth_kernel import AgentsynthError, Bounds, BudgetExceeded, EpisodeResult, from_json

if TYPE_CHECKING:
    from agentsynth_kernel import EpisodeConfig, Pack, PluginHost, RunInfo, Task

log = logging.getLogger(__name__)

# How much longer than an episode's own timeout the driver waits for its worker before taking it
# for dead (a worker wedged in native code never answers).
GRACE_S = 60.0


class WorkerLost(AgentsynthError):
    """The worker actors playing an episode died (each attempt); the episode fails, the run goes on."""


class _Worker:
    def __init__(self, name: str, handle: Any) -> None:
        self.name, self.handle = name, handle
        self.load = 0
        self.dead = False


class RayExecutor:
    """Episodes on Ray worker actors (``executor: {type: ray, address: auto}``).

    address: ``auto`` (the cluster this node belongs to), ``local`` (start a cluster in this
        process), ``HOST:PORT`` or ``ray://HOST:10001`` (Ray Client); unset: Ray's own default
        (``$RAY_ADDRESS``, else a running local cluster, else a new one). A process that has already
        called ``ray.init`` is used as it is.
    workers: actors to start (default: the cluster's CPUs / ``num_cpus``).
    num_cpus: CPUs each actor reserves.  per_worker: episodes in flight on one actor.
    runtime_env: passed to ``ray.init`` (pip packages, env_vars, working_dir for the workers).
    retries: how many times an episode whose worker died is played again on a fresh one.
    connect_timeout: seconds ``ray.init`` may take (Ray retries an unreachable address for ever).
    """

    def __init__(
        self,
        address: str | None = None,
        workers: Annotated[int, Bounds(low=1, high=4096)] | None = None,
        num_cpus: Annotated[float, Bounds(low=0)] = 1.0,
        per_worker: Annotated[int, Bounds(low=1, high=1024)] = 4,
        runtime_env: dict[str, Any] | None = None,
        retries: Annotated[int, Bounds(low=0, high=10)] = 1,
        namespace: str | None = None,
        connect_timeout: Annotated[float, Bounds(above=0)] = 120.0,
        run: Any = None,
    ) -> None:
        self.address = str(address) if address is not None else None
        self.workers_wanted, self.num_cpus, self.per_worker = workers, float(num_cpus), int(per_worker)
        self.runtime_env, self.retries, self.namespace = runtime_env, int(retries), namespace
        self.run = run
        self.connect_timeout = float(connect_timeout)
        # the engine awaits this many episodes at once; without an explicit worker count it is only
        # known once connected, so the spec's concurrency stays the bound until then
        self.concurrency: int | None = workers * self.per_worker if workers else None
        self.pool: list[_Worker] = []
        self.started = False
        self.start_error: Exception | None = None
        self.owns_ray = False
        self._start_lock: asyncio.Lock | None = None
        self._free: asyncio.Condition | None = None
        self._serial = 0
        self.broker: Any = None
        self._pump: asyncio.Task[None] | None = None
        self.ledger: Any = None
        self.open: dict[int, tuple[str, Any]] = {}  # reservation id -> (worker, driver Reservation)
        self.lost_workers = 0
        self._replacing = 0  # replacement workers starting (an episode waits for them)
        self._context: dict[str, Any] = {}

    # --- start-up ------------------------------------------------------------------------------

    async def _ensure_started(self, run: RunInfo, config: EpisodeConfig) -> None:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
            self._free = asyncio.Condition()
        async with self._start_lock:
            if self.start_error is not None:
                raise self.start_error
            if self.started:
                return
            try:
                await self._start(run, config)
            except Exception as exc:
                self.start_error = exc if isinstance(exc, AgentsynthError) else AgentsynthError(
                    f"ray executor: could not start on {self.address or 'the default cluster'}: "
                    f"{type(exc).__name__}: {exc}")
                raise self.start_error from None
            self.started = True

    async def _start(self, run: RunInfo, config: EpisodeConfig) -> None:
        import ray

        os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
            if self.address == "local":
                kwargs["include_dashboard"] = False
            if self.runtime_env:
                kwargs["runtime_env"] = self.runtime_env
            if self.namespace:
                kwargs["namespace"] = self.namespace
            # ray.init blocks for seconds (it may start a whole cluster), and retries an unreachable
            # address for ever: on a daemon thread, given up after connect_timeout
            try:
                await asyncio.wait_for(_on_daemon_thread(ray.init, address=self.address, **kwargs),
                                       timeout=self.connect_timeout)
            except TimeoutError:
                raise AgentsynthError(
                    f"ray executor: no Ray cluster answered at {self.address or '$RAY_ADDRESS / the default'} "
                    f"within {self.connect_timeout:g} s (connect_timeout)") from None
            self.owns_ray = True
        _raylet_notices_to_stderr()
        count = self.workers_wanted
        if count is None:
            cpus = float(ray.cluster_resources().get("CPU", 1))
            count = max(1, int(cpus // self.num_cpus) if self.num_cpus > 0 else int(cpus))
        self.concurrency = count * self.per_worker
        if run.spec.budget.usd is not None or run.spec.budget.tokens is not None:
            from agentsynth_kernel import client_for

            from .worker import BudgetBroker

            # the driver's own client: its ledger holds the cap, what earlier sessions spent and the
            # store's journal (kernel logic, unchanged); workers reserve on it through the broker
            self.ledger = client_for(run).ledger
            self.broker = ray.remote(BudgetBroker).options(num_cpus=0, max_concurrency=10_000).remote()
            self._pump = asyncio.get_running_loop().create_task(self._serve_budget())
        self._context = {
            "spec": run.spec, "pack": run.pack, "config": config, "run_id": run.run_id, "total": run.total,
            "run_hash": run.run_hash, "run_dir": str(run.run_dir) if run.run_dir is not None else None,
        }
        starting = [self._spawn() for _ in range(count)]
        problems = [await self._ready(w) for w in starting]
        if all(problems):
            for w in starting:
                self._kill(w)
            raise AgentsynthError(f"ray executor: no worker could start: {problems[0]}")
        for w, problem in zip(starting, problems, strict=True):
            if problem:
                log.warning("ray worker %s could not start: %s", w.name, problem)
                self._kill(w)
            else:
                self.pool.append(w)

    def _spawn(self) -> _Worker:
        import ray

        from .worker import EpisodeWorker  # its budget ledger imports the kernel's LLM client

        self._serial += 1
        name = f"w{self._serial}"
        actor = ray.remote(EpisodeWorker).options(num_cpus=self.num_cpus, max_concurrency=self.per_worker + 2,
                                                  max_restarts=0)
        return _Worker(name, actor.remote(name, self._context, self.broker))

    async def _ready(self, worker: _Worker) -> str:
        """'' when the worker can play the pack, else why not."""
        try:
            info = await worker.handle.ready.remote()
        except Exception as exc:
            return f"{type(exc).__name__}: {_first_line(exc)}"
        return str(info["problem"])

    def _kill(self, worker: _Worker) -> None:
        import ray

        worker.dead = True
        try:
            ray.kill(worker.handle, no_restart=True)
        except Exception:  # already gone
            pass

    # --- episodes ------------------------------------------------------------------------------

    async def run_episode(self, host: PluginHost, pack: Pack, task: Task, trial: int, seed: int,
                          config: EpisodeConfig, run: RunInfo) -> EpisodeResult:
        await self._ensure_started(run, config)
        from ray.exceptions import GetTimeoutError, RayActorError

        failures: list[str] = []
        for _attempt in range(self.retries + 1):
            worker = await self._acquire(run)
            ref = worker.handle.run_episode.remote(task.id, trial, seed)
            try:
                data = await asyncio.wait_for(asyncio.shield(_awaitable(ref)), timeout=config.timeout + GRACE_S)
            except (RayActorError, TimeoutError, GetTimeoutError) as exc:
                why = "did not answer in time" if isinstance(exc, (TimeoutError, GetTimeoutError)) else "died"
                failures.append(f"worker {worker.name} {why}: {_first_line(exc)}")
                await self._bury(worker)
                continue
            finally:
                await self._release(worker)
            return from_json(data, EpisodeResult)
        raise WorkerLost(f"{task.id} trial {trial}: " + "; ".join(failures))

    async def _acquire(self, run: RunInfo) -> _Worker:
        assert self._free is not None
        async with self._free:
            while True:
                live = [w for w in self.pool if not w.dead]
                if not live and not self._replacing:
                    raise WorkerLost("no live ray worker left (replacements could not start)")
                if not live:
                    await self._free.wait()
                    continue
                best = min(live, key=lambda w: w.load)
                if best.load < self.per_worker:
                    best.load += 1
                    return best
                await self._free.wait()

    async def _release(self, worker: _Worker) -> None:
        assert self._free is not None
        async with self._free:
            worker.load -= 1
            self._free.notify()

    async def _bury(self, worker: _Worker) -> None:
        """A dead (or wedged) worker: charge what it may have spent, start a fresh one in its place."""
        if worker.dead:
            return
        self.lost_workers += 1
        self._kill(worker)
        for rid, (owner, res) in list(self.open.items()):
            if owner == worker.name:  # it may have sent the request: charge the worst case
                del self.open[rid]
                self.ledger.settle(res, res.tokens, None)
        assert self._free is not None
        self._replacing += 1
        try:
            fresh = self._spawn()
            problem = await self._ready(fresh)
        finally:
            self._replacing -= 1
        async with self._free:
            self.pool = [w for w in self.pool if w is not worker]
            if problem:
                log.warning("ray executor: a replacement worker could not start: %s", problem)
            else:
                self.pool.append(fresh)
            self._free.notify_all()

    # --- the budget ----------------------------------------------------------------------------

    async def _serve_budget(self) -> None:
        """Answer the workers' reservations from the driver's ledger, for the life of the run."""
        pending: set[asyncio.Task[None]] = set()
        while True:
            try:
                messages = await _awaitable(self.broker.pull.remote(0.5))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker is gone: workers get no answers, their episodes fail
                log.warning("ray executor: the budget broker is gone: %s", exc)
                return
            for msg in messages:
                if msg["op"] == "reserve":
                    task = asyncio.get_running_loop().create_task(self._reserve(msg))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                else:
                    self._settle(msg)

    def _settle(self, msg: dict[str, Any]) -> None:
        entry = self.open.pop(msg["id"], None)
        if entry is not None:
            self.ledger.settle(entry[1], msg["tokens"], msg["usd"])

    async def _drain_settlements(self) -> None:
        """The last settlements of the run (workers flush them before returning a result)."""
        for _ in range(1000):
            try:
                messages = await asyncio.wait_for(_awaitable(self.broker.pull.remote(0.0)), timeout=10)
            except Exception:
                return
            if not messages:
                return
            for msg in messages:
                if msg["op"] == "settle":
                    self._settle(msg)

    async def _reserve(self, msg: dict[str, Any]) -> None:
        from agentsynth_kernel import BudgetUnenforceable

        price = tuple(msg["price"]) if msg["price"] is not None else None
        try:
            res = await self.ledger.reserve(msg["prompt_tokens"], msg["max_completion"], price,
                                            msg["min_completion"], model=msg["model"])
        except BudgetExceeded as exc:
            kind = "unenforceable" if isinstance(exc, BudgetUnenforceable) else "budget"
            await _awaitable(self.broker.answer.remote(msg["id"], {"error": kind, "message": str(exc)}))
            return
        self.open[msg["id"]] = (msg["worker"], res)
        reply = {"error": "", "id": msg["id"], "tokens": res.tokens, "pico": res.pico,
                 "allowance": res.completion_allowance}
        delivered = False
        try:
            delivered = await _awaitable(self.broker.answer.remote(msg["id"], reply))
        finally:
            if not delivered and self.open.pop(msg["id"], None) is not None:
                self.ledger.settle(res, 0, 0.0)  # its worker was gone before it could send anything

    # --- the end -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        import ray

        if self._pump is not None:
            self._pump.cancel()
            try:
                await self._pump
            except (asyncio.CancelledError, Exception):
                pass
        if self.broker is not None:
            await self._drain_settlements()
        closing = [w.handle.aclose.remote() for w in self.pool if not w.dead]
        for ref in closing:
            try:
                await asyncio.wait_for(_awaitable(ref), timeout=10)
            except Exception:
                pass
        for w in self.pool:
            self._kill(w)
        if self.broker is not None:
            try:
                ray.kill(self.broker, no_restart=True)
            except Exception:
                pass
        for _rid, (_owner, res) in list(self.open.items()):  # answered, never settled: the worst case
            self.ledger.settle(res, res.tokens, None)
        self.open.clear()
        self.pool = []
        if self.owns_ray and ray.is_initialized():
            await asyncio.to_thread(ray.shutdown)
            self.owns_ray = False


async def _on_daemon_thread(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on a daemon thread: one that never returns cannot hold up the exit
    (``asyncio.to_thread``'s pool is joined when the loop closes)."""
    import threading

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, exc: BaseException | None) -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, exc = fn(*args, **kwargs), None
        except BaseException as error:  # handed to the awaiting coroutine
            value, exc = None, error
        try:
            loop.call_soon_threadsafe(settle, value, exc)
        except RuntimeError:  # the loop is gone
            pass

    threading.Thread(target=target, name="agentsynth-ray-init", daemon=True).start()
    return await future


def _raylet_notices_to_stderr() -> None:
    """Ray prints cluster notices ("(raylet) A worker died ...") on the driver's *stdout*, where
    ``--json -`` writes the report: send them to stderr. Ray has no switch for it; if its private
    printer moves, the notices stay where Ray puts them."""
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "__agentsynth__", False):
        return

    def to_stderr(data: Any, ignore_prefix: bool) -> None:
        if isinstance(data, dict) and data.get("pid") == "raylet":
            data = {**data, "is_err": True}
        original(data, ignore_prefix)

    to_stderr.__agentsynth__ = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


async def _awaitable(ref: Any) -> Any:
    return await ref


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
