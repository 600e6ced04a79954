"""An OpenAPI document as tools: names, merged parameters, $refs, filters, bad documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from agentsynth_rest.openapi import OpenAPIError, load_document, operations, parse_document
from conftest import TICKETS, WORLD


def _ops(doc, **filters):
    return {op.tool: op for op in operations(doc, "doc.yaml", **filters)}


def test_every_operation_of_the_tickets_document_is_a_tool():
    doc, _ = load_document("openapi.yaml", base_dir=TICKETS)
    ops = _ops(doc)
    assert len(ops) == 12 and "resetDatabase" in ops
    update = ops["updateTicket"]
    assert update.label == "PATCH /tickets/{ticket_id}"
    params = update.parameters
    # the path-item parameter ($ref), and the JSON body's properties, merged; nullable -> JSON Schema
    assert set(params["properties"]) == {"ticket_id", "title", "status", "priority", "assignee_id"}
    assert params["required"] == ["ticket_id"] and params["additionalProperties"] is False
    assert params["properties"]["status"] == {"type": "string", "enum": ["open", "pending", "closed"]}
    assert params["properties"]["assignee_id"] == {"type": ["integer", "null"]}
    assert {(a.key, a.location) for a in update.arguments} >= {("ticket_id", "path"), ("status", "body")}
    create = ops["createTicket"].parameters
    assert create["required"] == ["title", "requester", "team"]


def test_names_from_method_and_path_a_body_that_collides_and_headers_that_are_never_the_agents():
    doc, _ = load_document("hostile.yaml", base_dir=WORLD)
    ops = _ops(doc)
    assert "get_teapot" in ops  # no operationId
    echo = ops["echo"]
    where = {a.key: a.location for a in echo.arguments}
    # body property 'q' collides with the query parameter 'q': the body is one argument
    assert where == {"X-Trace": "header", "q": "query", "n": "query", "body": "whole_body"}
    assert "Authorization" not in echo.parameters["properties"]  # credentials come from the environment only
    assert "session" not in echo.parameters["properties"]  # cookies are not the agent's


def test_filters_by_method_and_operation_and_unknown_names_are_errors():
    doc, _ = load_document("openapi.yaml", base_dir=TICKETS)
    assert set(_ops(doc, methods=["get"])) == {"listUsers", "getUser", "listTickets", "getTicket", "listComments"}
    assert set(_ops(doc, include=["getTicket", "DELETE /tickets/{ticket_id}"])) == {"getTicket", "deleteTicket"}
    assert "resetDatabase" not in _ops(doc, exclude=["resetDatabase"])
    with pytest.raises(OpenAPIError, match="no operation of doc.yaml is named getTicekt"):
        _ops(doc, include=["getTicekt"])
    with pytest.raises(OpenAPIError, match="unknown HTTP method"):
        _ops(doc, methods=["fetch"])


@pytest.mark.parametrize("doc, message", [
    (b"swagger: '2.0'\npaths: {}", "expected a 3.x version string"),
    (b"openapi: 3.0.0\n", "paths: expected a mapping"),
    (b"[1, 2", "not JSON or YAML"),
    (b"openapi: 3.0.0\npaths: {'/a/{id}': {get: {responses: {}}}}", "path parameter(s) id of /a/{id} are not declared"),
    (b"openapi: 3.0.0\npaths: {/a: {get: {parameters: [{$ref: '#/components/parameters/Nope'}]}}}",
     "points at nothing"),
    (b"openapi: 3.0.0\npaths: {/a: {get: {parameters: [{$ref: 'http://elsewhere/p.yaml'}]}}}",
     "only local references"),
    (b"openapi: 3.0.0\npaths: {/a: {get: {operationId: x}}, /b: {get: {operationId: x}}}", "tool name 'x' is also"),
    (b"openapi: 3.0.0\npaths: {/a: {post: {requestBody: {content: {text/csv: {}}}}}}", "only JSON bodies"),
])
def test_a_bad_document_is_an_error_naming_the_place(doc, message):
    with pytest.raises(OpenAPIError, match=re.escape(message)) as info:
        operations(parse_document(doc, "api.yaml"), "api.yaml")
    assert str(info.value).startswith(("api.yaml", "operations"))


def test_recursive_schemas_are_cut_and_ref_cycles_refused(tmp_path: Path):
    doc = {"openapi": "3.0.0", "paths": {"/n": {"post": {"operationId": "node", "requestBody": {"content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}}}},
        "components": {"schemas": {"Node": {"type": "object", "properties": {
            "name": {"type": "string"}, "child": {"$ref": "#/components/schemas/Node"}}}}}}
    op = operations(doc, "d")[0]
    assert op.parameters["properties"]["child"] == {}  # cut where it recurses
    loop = {"openapi": "3.0.0", "paths": {"/a": {"$ref": "#/paths/~1b"}, "/b": {"$ref": "#/paths/~1a"}}}
    with pytest.raises(OpenAPIError, match="cycle"):
        operations(loop, "d")
    (tmp_path / "api.json").write_text(yaml.safe_dump(doc))
    assert load_document(str(tmp_path / "api.json"), base_dir=tmp_path)[0]["paths"]
