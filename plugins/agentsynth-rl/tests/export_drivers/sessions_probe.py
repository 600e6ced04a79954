"""Run inside the fresh verifiers venv: attack the loopback endpoint that holds the rollouts' worlds
(what the MCP tool server calls) and print what it answered, one JSON object."""

from __future__ import annotations

import asyncio
import json

import httpx

from agentsynth_rl.loop import on_loop
from agentsynth_rl.verifiers_env import PackData, sessions

UPDATE = {"name": "sql_execute", "arguments": {"sql": "UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6"}}


async def main() -> dict:
    registry = await on_loop(sessions())
    sid = await on_loop(registry.open(PackData(pack="core", task_id="update-email", split="train", seed=5), 60.0))
    other = await on_loop(registry.open(PackData(pack="core", task_id="update-email", split="train", seed=5), 60.0))
    url = f"{registry.url}/sessions"
    good = {"Authorization": f"Bearer {registry.token}"}
    out: dict = {"url": registry.url}
    async with httpx.AsyncClient(timeout=60) as client:
        out["no_token"] = (await client.post(f"{url}/{sid}/call", json=UPDATE)).status_code
        out["wrong_token"] = (await client.post(f"{url}/{sid}/call", json=UPDATE,
                                                headers={"Authorization": "Bearer guess"})).status_code
        out["unknown_session"] = (await client.post(f"{url}/{'0' * 32}/call", json=UPDATE, headers=good)).status_code
        out["bad_body"] = (await client.post(f"{url}/{sid}/call", content=b"[1, 2", headers=good)).status_code
        out["unknown_tool"] = (await client.post(f"{url}/{sid}/call", json={"name": "os_system", "arguments": {}},
                                                 headers=good)).json()
        out["tools"] = [t["name"] for t in (await client.post(f"{url}/{sid}/tools", json={}, headers=good)).json()["tools"]]
        out["call"] = (await client.post(f"{url}/{sid}/call", json=UPDATE, headers=good)).json()
    try:  # a held-out task cannot be opened by claiming it is train
        await on_loop(registry.open(PackData(pack="core", task_id="count-pending-orders", split="train", seed=1), 60.0))
        out["test_task_as_train"] = "opened"
    except ValueError as exc:
        out["test_task_as_train"] = str(exc)
    out["finish"] = {k: v for k, v in (await on_loop(registry.finish(sid, "done"))).items()
                     if k in ("status", "reward", "split", "scored")}
    out["other_world"] = {k: v for k, v in (await on_loop(registry.finish(other, "done"))).items()
                          if k in ("status", "reward")}  # its own world: nothing was changed there
    try:
        await on_loop(registry.finish(sid, "done"))
        out["finish_again"] = "scored twice"
    except RuntimeError as exc:
        out["finish_again"] = str(exc)
    await on_loop(registry.stop())
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
