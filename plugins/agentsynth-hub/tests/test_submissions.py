"""Submissions through a real hub: honest runs are ranked, tampered ones refused with their reason."""

from __future__ import annotations

import copy
import gzip
import json
import os

import httpx
import pytest

from agentsynth_hub.client import build_submission, encode


def post(hub, payload, token="alice", **kw):
    body = payload if isinstance(payload, bytes) else encode(payload)
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {hub.tokens.get(token, token)}"
    headers.update(kw.pop("headers", {}))
    return httpx.post(hub.url + "/api/submissions", content=body, headers=headers, timeout=300)


def resummarize(payload):
    """Make a tampered payload's summary agree with its (tampered) episodes, as a careful cheat would."""
    from agentsynth_kernel import EpisodeResult, from_json, summarize_results

    eps = [from_json(json.dumps(e), EpisodeResult) for e in payload["episodes"]]
    s = summarize_results(eps, run_id="", pack={}, policy={}, trials=1, seed=0, planned=len(eps))
    payload["summary"].update(episodes=s["episodes"], counts=s["counts"], pass_rate=s["pass_rate"])
    return payload


def test_honest_runs_are_ranked_with_the_tie_rule(hub, accepted):
    assert accepted["oracle"]["status"] == "accepted" and accepted["oracle"]["replayed"] == 22
    board = httpx.get(hub.url + "/api/packs/core/leaderboard").json()
    assert len(board["boards"]) == 1 and board["boards"][0]["split"] == "all"
    entries = board["boards"][0]["entries"]
    by_label = {e["label"]: e for e in entries}
    assert set(by_label) == {"oracle A", "oracle B", "noop"}
    # oracle 22/22 and oracle with 2 trials 44/44: the intervals overlap -> they share rank 1, statistically tied
    assert by_label["oracle B"]["episodes"] == 44 and by_label["oracle B"]["ci95"] == [0.9197, 1.0]
    assert by_label["oracle A"]["rank"] == by_label["oracle B"]["rank"] == 1
    assert by_label["oracle A"]["tied"] and by_label["oracle B"]["tied"]
    assert by_label["oracle A"]["ci95"] == [0.8513, 1.0]
    # noop: 0/22, its interval [0, 0.149] does not reach the leader's low end -> its own position
    assert by_label["noop"]["rank"] == 3 and not by_label["noop"]["tied"]
    assert by_label["noop"]["passed"] == 0 and by_label["noop"]["episodes"] == 22
    page = httpx.get(hub.url + "/packs/core")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "oracle A" in page.text and "1 (tied)" in page.text and "85.1% – 100.0%" in page.text
    index = httpx.get(hub.url + "/")
    assert "/packs/core" in index.text


def test_the_hub_recorded_provenance_and_recomputed_summary(hub, accepted):
    rec = httpx.get(f"{hub.url}/api/submissions/{accepted['noop']['submission']}").json()
    assert rec["status"] == "accepted" and rec["submitter"] == "alice"
    assert rec["details"]["summary"]["counts"] == {"passed": 0, "failed": 22, "error": 0}
    assert rec["details"]["provenance"]["policy"]["type"] == "noop"
    assert rec["details"]["verification"]["reproduced"] == 22
    assert rec["details"]["provenance"]["versions"]["agentsynth-sql"]


def test_the_same_run_twice_is_refused(hub, runs, accepted):
    r = post(hub, build_submission(runs["oracle"]))
    assert r.status_code == 422 and r.json()["check"] == "duplicate"


def test_a_copy_under_another_run_id_is_refused(hub, runs, accepted):
    """The accepted noop run relabelled as a new run (run id changed everywhere): the same episodes."""
    payload = build_submission(runs["noop"])
    payload["meta"]["run_id"] = "0123456789ab"
    for ep in payload["episodes"]:
        ep["provenance"]["run_id"] = "0123456789ab"
    r = post(hub, payload, token="bob")
    assert r.status_code == 422 and r.json()["check"] == "duplicate"
    assert f"(submission #{accepted['noop']['submission']})" in r.json()["error"]


def _refused(hub, payload, check, text):
    r = post(hub, payload, token="mallory")
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["check"] == check, body
    assert text in body["error"], body
    rec = httpx.get(f"{hub.url}/api/submissions/{body['submission']}").json()
    assert rec["status"] == "refused" and text in rec["reason"]
    return body


def test_edited_verdicts_do_not_replay(hub, runs):
    """The noop run with one episode turned into a pass (status, verdicts, summary all made consistent)."""
    payload = build_submission(runs["noop_t"])
    ep = payload["episodes"][3]
    ep["status"] = "passed"
    ep["error_kind"] = ""
    for v in ep["verdicts"]:
        v["passed"], v["score"] = True, 1.0
    resummarize(payload)
    body = _refused(hub, payload, "replay", "do not reproduce")
    assert ep["task_id"] in body["error"] and "submitted passed, replay failed" in body["error"]


def test_a_trajectory_that_does_not_replay(hub, runs):
    """An oracle episode whose tool calls were swapped for another task's: verdicts kept, world disagrees."""
    payload = build_submission(runs["oracle_t"])
    eps = payload["episodes"]
    target = next(e for e in eps if e["task_id"] == "update-email")
    other = next(e for e in eps if e["task_id"] != "update-email" and e["trajectory"]["steps"])
    target["trajectory"]["steps"] = copy.deepcopy(other["trajectory"]["steps"])
    _refused(hub, payload, "replay", "'update-email'")


def test_an_edited_summary(hub, runs):
    payload = build_submission(runs["noop_t"])
    payload["summary"]["counts"] = {"passed": 22, "failed": 0, "error": 0}
    _refused(hub, payload, "summary", 'summary.counts claims {"passed": 22')


def test_a_wrong_pack_hash(hub, runs):
    payload = build_submission(runs["oracle_t"])
    payload["meta"]["pack"]["content_hash"] = "sha256:" + "0" * 64
    _refused(hub, payload, "pack", "is not a version of 'core' on this hub")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("content_hash", "../../../../etc", "meta.pack.content_hash: '../../../../etc' is not sha256:<64 hex digits>"),
    ("id", "../core", "meta.pack.id: '../core' is not a pack id"),
])
def test_pack_names_that_are_paths(hub, runs, key, value, message):
    payload = build_submission(runs["oracle_t"])
    payload["meta"]["pack"][key] = value
    _refused(hub, payload, "format", message)


def test_an_unknown_pack(hub, runs):
    payload = build_submission(runs["oracle_t"])
    payload["meta"]["pack"]["id"] = "secret-pack"
    _refused(hub, payload, "pack", "pack 'secret-pack' is not on this hub (it has: core")


def test_an_edited_spec_breaks_the_run_hash(hub, runs):
    payload = build_submission(runs["oracle_t"])
    payload["meta"]["spec"]["max_steps"] = 7
    _refused(hub, payload, "run_hash", "were changed after the run")


def test_edited_versions_break_the_run_hash_or_are_refused(hub, runs):
    payload = build_submission(runs["oracle_t"])
    payload["meta"]["versions"]["agentsynth-sql"] = "0.0.1"
    _refused(hub, payload, "run_hash", "recomputed")


def rehash(payload):
    """Recompute the run hash as a careful cheat would (it is a checksum, not a signature)."""
    from agentsynth_kernel import Plan, RunSpec, load_pack, pack_record, run_hash, select_tasks, structure

    pack = load_pack("core")
    spec = structure(payload["meta"]["spec"], RunSpec, source="test")
    payload["meta"]["run_hash"] = run_hash(payload["meta"]["spec"], pack_record(pack, spec),
                                           Plan(spec, select_tasks(spec, pack)), payload["meta"]["versions"])
    for ep in payload["episodes"]:
        ep["provenance"]["run_hash"] = payload["meta"]["run_hash"]
    return payload


def test_other_world_plugin_versions_are_refused(hub, runs):
    payload = build_submission(runs["oracle_t"])
    payload["meta"]["versions"]["agentsynth-sql"] = "0.0.1"
    _refused(hub, rehash(payload), "versions", "agentsynth-sql 0.0.1 ran the submission; the hub replays with")


def test_another_kernel_minor_version_is_refused(hub, runs):
    payload = build_submission(runs["oracle_t"])
    payload["meta"]["versions"]["agentsynth"] = "0.9.0"
    _refused(hub, rehash(payload), "versions", "agentsynth 0.9.0 ran the submission")


def test_status_that_does_not_follow_from_verdicts(hub, runs):
    payload = build_submission(runs["noop_t"])
    payload["episodes"][0]["status"] = "passed"
    resummarize(payload)
    _refused(hub, payload, "episodes", "does not follow from its verdicts")


def test_a_dropped_episode_is_an_incomplete_run(hub, runs):
    payload = build_submission(runs["noop_t"])
    del payload["episodes"][5]
    resummarize(payload)
    _refused(hub, payload, "plan", "incomplete run: 21 of 22")


def test_a_moved_seed_is_not_a_planned_episode(hub, runs):
    payload = build_submission(runs["oracle_t"])
    payload["episodes"][2]["seed"] += 1
    _refused(hub, payload, "plan", "is not an episode the spec plans")


def test_a_cherry_picked_run(hub, runs):
    _refused(hub, build_submission(runs["only"]), "spec", "played only some tasks (only: update-email)")


def test_not_an_episode(hub, runs):
    payload = build_submission(runs["noop_t"])
    payload["episodes"][1]["trial"] = "zero"
    _refused(hub, payload, "format", "episodes[1]: not an EpisodeResult")


def test_wrong_format(hub):
    _refused(hub, {"format": "something/9"}, "format", "expected 'agentsynth-hub-submission/1'")


def test_not_json_and_not_gzip(hub):
    r = post(hub, gzip.compress(b"{not json"), token="mallory")
    assert r.status_code == 400 and "not JSON" in r.json()["error"]
    r = post(hub, b"plain bytes", token="mallory")
    assert r.status_code == 400 and "not gzip data" in r.json()["error"]
    r = post(hub, b"x", token="mallory", headers={"Content-Encoding": "br"})
    assert r.status_code == 400 and "'br' is not supported" in r.json()["error"]


def test_an_oversized_upload(hub):
    r = post(hub, os.urandom(1_200_000), token="mallory")
    assert r.status_code == 413 and "exceeds the limit of 1048576 bytes" in r.json()["error"]


def test_a_gzip_bomb(hub):
    bomb = gzip.compress(b" " * (64 << 20), compresslevel=9)  # 64 MB of spaces in ~64 kB
    assert len(bomb) < 1 << 20
    r = post(hub, bomb, token="mallory")
    assert r.status_code == 413 and "decompressed submission exceeds 8388608 bytes" in r.json()["error"]


@pytest.mark.parametrize("token", [None, "not-a-token", "revoked"])
def test_missing_invalid_or_revoked_token(hub, runs, token):
    headers = {"Authorization": "Basic YWxpY2U6eA=="} if token == "basic" else {}
    r = post(hub, build_submission(runs["noop_t"]), token=token, headers=headers)
    assert r.status_code == 401 and "missing or invalid token" in r.json()["error"]


def test_a_flood_is_rate_limited(hub):
    codes = [post(hub, b"junk", token="flood").status_code for _ in range(25)]
    assert codes == [400] * 25
    r = post(hub, b"junk", token="flood")
    assert r.status_code == 429 and "rate limit: 25 submissions by flood" in r.json()["error"]
    assert 1 <= int(r.headers["Retry-After"]) <= 3601
    # another submitter is not affected
    assert post(hub, b"junk", token="bob").status_code == 400
