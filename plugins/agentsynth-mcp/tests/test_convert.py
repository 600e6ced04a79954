"""MCP results -> observations and checker values, on SDK result objects (no server needed)."""

from __future__ import annotations

import base64

from mcp_types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)

from agentsynth_mcp.convert import MediaStore, agent_tool_names, result_value, tool_observation, tool_spec


def test_all_content_kinds_render_as_text_and_references():
    blob = base64.b64encode(b"\x00\x01\x02").decode()
    result = CallToolResult(content=[
        TextContent(type="text", text="hello"),
        ImageContent(type="image", data=base64.b64encode(b"img").decode(), mime_type="image/png"),
        ResourceLink(type="resource_link", uri="file:///r.txt", name="r"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri="mem://a", text="embedded text")),
        EmbeddedResource(type="resource", resource=BlobResourceContents(uri="mem://b", blob=blob,
                                                                         mime_type="application/zip")),
    ])
    obs = tool_observation(result, MediaStore(), max_chars=10_000)
    lines = obs.content.splitlines()
    assert lines[0] == "hello"
    assert lines[1].startswith("[image image/png, 3 bytes, sha256:")
    assert lines[2] == "[resource file:///r.txt (r)]"
    assert lines[3] == "embedded text"
    assert lines[4].startswith("[blob application/zip, 3 bytes") and lines[4].endswith("from mem://b")
    kinds = [m["type"] for m in obs.data["media"]]
    assert kinds == ["image", "resource_link", "blob"] and obs.error is False


def test_truncation_errors_and_structured_only_results():
    long = CallToolResult(content=[TextContent(type="text", text="x" * 100)])
    obs = tool_observation(long, MediaStore(), max_chars=10)
    assert obs.content.startswith("x" * 10) and "[truncated 90 characters]" in obs.content
    err = CallToolResult(content=[], is_error=True)
    obs = tool_observation(err, MediaStore(), max_chars=100)
    assert obs.error and obs.content == "(error with no message)"
    structured = CallToolResult(content=[], structured_content={"a": 1})
    assert tool_observation(structured, MediaStore(), 100).content == '{"a": 1}'


def test_result_value_prefers_structured_and_unwraps_only_the_sdk_wrapper():
    wrapped = CallToolResult(content=[TextContent(type="text", text="3")], structured_content={"result": 3})
    assert result_value(wrapped) == 3
    real = CallToolResult(content=[TextContent(type="text", text='{"result": 3}')], structured_content={"result": 3})
    assert result_value(real) == {"result": 3}
    text_json = CallToolResult(content=[TextContent(type="text", text='[1, 2]')])
    assert result_value(text_json) == [1, 2]
    plain = CallToolResult(content=[TextContent(type="text", text="closed")])
    assert result_value(plain) == "closed"


def test_tool_spec_keeps_the_json_schema():
    tool = Tool(name="t", description="does t", input_schema={"type": "object", "properties": {"n": {"type": "integer"}},
                                                              "required": ["n"]})
    spec = tool_spec(tool)
    assert spec.to_openai()["function"] == {"name": "t", "description": "does t", "parameters": tool.input_schema}
    bare = tool_spec(Tool(name="u", input_schema={"type": "object"}))
    assert bare.parameters == {"type": "object", "properties": {}}


def test_agent_tool_names_are_openai_safe_and_unique():
    names = agent_tool_names(["ok_name", "github.create_issue", "github_create_issue", "x" * 100, "a/b"])
    assert names["ok_name"] == "ok_name" and names["github_create_issue"] == "github_create_issue"
    assert names["github.create_issue"] == "github_create_issue_2"
    assert len(names["x" * 100]) <= 64 and names["a/b"] == "a_b"
    assert len(set(names.values())) == 5
