"""Run inside the fresh verifiers venv: a multi-turn task (the support pack's scripted customer)
through the loopback endpoint the verifiers export's MCP tool server calls. The world lists
``message_user`` and not the user's own tools; the customer's replies come back as its results;
the verdict comes once the customer ended the talk (the oracle) or when the rollout ends (a
shortcut: the address changed without asking). Prints one JSON object."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from agentsynth_rl.loop import on_loop
from agentsynth_rl.verifiers_env import PackData, sessions

PACK = str(Path(__file__).resolve().parents[4] / "packs" / "agentsynth-pack-support" / "agentsynth_pack_support")


def say(text: str) -> dict:
    return {"name": "message_user", "arguments": {"message": text}}


def sql(tool: str, query: str) -> dict:
    return {"name": tool, "arguments": {"sql": query}}


ORACLE = [
    say("Happy to help. What is the email address on your account?"),
    sql("sql_query", "SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id "
                     "WHERE c.email = 'sam@example.com' AND o.item = 'Blue backpack'"),
    say("I found your backpack order 1051; it is still pending. What is the new address?"),
    say("I will change the shipping address of order 1051 to 12 Elm St. Is that correct?"),
    sql("sql_execute", "UPDATE orders SET address = '12 Elm St' WHERE id = 1051"),
    say("Done: order 1051 will go to 12 Elm St."),
]


async def main() -> dict:
    registry = await on_loop(sessions())
    data = PackData(pack=PACK, task_id="change-address", split="train", seed=3)
    out: dict = {}
    async with httpx.AsyncClient(timeout=60) as client:
        headers = {"Authorization": f"Bearer {registry.token}"}
        sid = await on_loop(registry.open(data, 60.0))
        url = f"{registry.url}/sessions/{sid}"
        out["tools"] = [t["name"] for t in (await client.post(f"{url}/tools", json={}, headers=headers)).json()["tools"]]
        out["replies"] = [(await client.post(f"{url}/call", json=call, headers=headers)).json()["content"]
                          for call in ORACLE]
        out["oracle"] = {k: v for k, v in (await on_loop(registry.finish(sid, "Anything else?"))).items()
                         if k in ("status", "reward", "scored", "error_kind")}
        shortcut = await on_loop(registry.open(data, 60.0))
        url = f"{registry.url}/sessions/{shortcut}"
        await client.post(f"{url}/call", json=ORACLE[4], headers=headers)
        out["shortcut"] = {k: v for k, v in (await on_loop(registry.finish(shortcut, "Done."))).items()
                           if k in ("status", "reward", "scored")}
    await on_loop(registry.stop())
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
