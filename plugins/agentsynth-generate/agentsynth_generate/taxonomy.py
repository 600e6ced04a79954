"""A seed-task taxonomy across domains, with a deterministic sampler.

Each domain has a small tool catalog and seed tasks tagged with the tool-use pattern they need
(``single``: one call, ``chain``: an output feeds the next input, ``parallel``: independent calls,
``lookup_action``: read then change). :func:`sample` picks ``n`` seeds round-robin over the chosen
domains and, inside a domain, over its patterns, so a batch covers domains and patterns evenly
instead of paraphrasing one query. Same ``(n, seed, domains)``, same list.
"""

from __future__ import annotations

import random
from typing import Any

from agentsynth_kernel import ToolSpec

from .catalog import Scenario


def _tool(name: str, description: str, props: dict[str, Any], required: list[str] | None = None) -> ToolSpec:
    return ToolSpec(name, description, {"type": "object", "properties": props,
                                        "required": list(props) if required is None else required})


S = {"type": "string"}
N = {"type": "number"}
I = {"type": "integer", "minimum": 1}  # noqa: E741

DOMAINS: dict[str, dict[str, Any]] = {
    "finance": {
        "tools": [
            _tool("get_account_balance", "Current balance of an account.", {"account_id": S}),
            _tool("list_transactions", "Transactions of an account in a date range (YYYY-MM-DD).",
                  {"account_id": S, "start_date": {"type": "string", "format": "date"},
                   "end_date": {"type": "string", "format": "date"}}),
            _tool("convert_currency", "Convert an amount between ISO currencies.",
                  {"amount": N, "from_currency": {"type": "string", "enum": ["USD", "EUR", "GBP", "JPY"]},
                   "to_currency": {"type": "string", "enum": ["USD", "EUR", "GBP", "JPY"]}}),
            _tool("transfer_funds", "Move money between two accounts.",
                  {"from_account": S, "to_account": S, "amount": N}),
        ],
        "seeds": [
            ("single", "What is the balance of account ACC-1042?"),
            ("chain", "Take the balance of ACC-2001 and tell me what it is worth in EUR."),
            ("parallel", "Compare the balances of ACC-1042 and ACC-2001."),
            ("lookup_action", "If ACC-1042 holds more than 500, transfer 200 of it to ACC-2001."),
            ("chain", "List the March 2026 transactions of ACC-3300 and sum the withdrawals."),
        ],
    },
    "travel": {
        "tools": [
            _tool("search_flights", "Flights between two IATA airports on a date.",
                  {"origin": S, "destination": S, "date": {"type": "string", "format": "date"}}),
            _tool("get_weather", "Forecast for a city on a date.", {"city": S, "date": {"type": "string", "format": "date"}}),
            _tool("book_hotel", "Book a hotel room.", {"city": S, "check_in": {"type": "string", "format": "date"},
                                                       "nights": I}),
        ],
        "seeds": [
            ("single", "Find flights from LHR to JFK on 2026-05-04."),
            ("parallel", "What is the weather in Lisbon and in Porto on 2026-06-10?"),
            ("lookup_action", "Check the weather in Rome on 2026-07-01 and book 3 nights there if it is sunny."),
            ("chain", "Find the cheapest flight from CDG to BCN on 2026-04-12 and book a hotel at the destination for 2 nights."),
        ],
    },
    "analytics": {
        "tools": [
            _tool("run_query", "Run a read-only SQL query on the warehouse.", {"sql": S}),
            _tool("describe_table", "Columns and types of a warehouse table.", {"table": S}),
            _tool("create_chart", "Render a chart from rows.", {"kind": {"type": "string", "enum": ["bar", "line", "pie"]},
                                                                "title": S}),
        ],
        "seeds": [
            ("single", "Which columns does the orders table have?"),
            ("chain", "Describe the sessions table, then count the sessions per country."),
            ("lookup_action", "Compute monthly revenue for 2025 and draw it as a line chart."),
            ("parallel", "How many rows do the users and the orders tables have?"),
        ],
    },
    "support": {
        "tools": [
            _tool("lookup_customer", "A customer's record by email.", {"email": {"type": "string", "format": "email"}}),
            _tool("get_order_status", "Status of an order.", {"order_id": S}),
            _tool("create_ticket", "Open a support ticket.", {"customer_id": S, "subject": S,
                                                              "priority": {"type": "string", "enum": ["low", "normal", "high"]}}),
            _tool("issue_refund", "Refund an order (full or partial).", {"order_id": S, "amount": N}),
        ],
        "seeds": [
            ("single", "Where is order ORD-5531?"),
            ("chain", "Find the customer with email dana@example.com and open a high-priority ticket about a missing parcel."),
            ("lookup_action", "Refund order ORD-7710 in full if it was delivered damaged."),
            ("parallel", "Give me the status of orders ORD-1001 and ORD-1002."),
        ],
    },
    "coding": {
        "tools": [
            _tool("search_code", "Search the repository for a regex.", {"pattern": S, "path": S}, ["pattern"]),
            _tool("read_file", "Read a file of the repository.", {"path": S}),
            _tool("run_tests", "Run the test suite (optionally one test file).", {"path": S}, []),
        ],
        "seeds": [
            ("single", "Run the tests and tell me which ones fail."),
            ("chain", "Find where parse_config is defined and show me that file."),
            ("lookup_action", "Search for TODO comments under src/ and run the tests of the first file that has one."),
            ("parallel", "Show me README.md and pyproject.toml."),
        ],
    },
    "ecommerce": {
        "tools": [
            _tool("search_products", "Search the catalog.", {"query": S, "max_price": N}, ["query"]),
            _tool("get_product", "One product by id.", {"product_id": S}),
            _tool("add_to_cart", "Put a product in the cart.", {"product_id": S, "quantity": I}),
        ],
        "seeds": [
            ("single", "Search for running shoes under 80."),
            ("chain", "Find a USB-C charger and add two of the first result to my cart."),
            ("lookup_action", "Show product P-204 and add it to my cart if it is in stock."),
            ("parallel", "Compare products P-100 and P-101."),
        ],
    },
}


def domain_names() -> list[str]:
    return list(DOMAINS)


def domain_tools(domain: str) -> list[ToolSpec]:
    return list(DOMAINS[domain]["tools"])


def sample(n: int, seed: int, domains: list[str] | None = None) -> list[Scenario]:
    """``n`` seed scenarios, round-robin over ``domains`` (default: all) and their patterns, shuffled by
    ``seed`` inside each domain. When ``n`` exceeds the seeds, the list repeats with new ids."""
    chosen = list(domains or DOMAINS)
    rng = random.Random(f"taxonomy:{seed}")
    queues: dict[str, list[tuple[str, str, int]]] = {}
    for d in chosen:
        seeds = [(pattern, text, i) for i, (pattern, text) in enumerate(DOMAINS[d]["seeds"])]
        rng.shuffle(seeds)
        # interleave patterns: one of each pattern before a second of any
        by_pattern: dict[str, list[tuple[str, str, int]]] = {}
        for item in seeds:
            by_pattern.setdefault(item[0], []).append(item)
        ordered: list[tuple[str, str, int]] = []
        while any(by_pattern.values()):
            for pattern in sorted(by_pattern, key=lambda p: rng.random()):
                if by_pattern[pattern]:
                    ordered.append(by_pattern[pattern].pop(0))
        queues[d] = ordered
    out: list[Scenario] = []
    rounds = 0
    while len(out) < n:
        for d in chosen:
            if len(out) >= n:
                break
            queue = queues[d]
            pattern, text, index = queue[(len([s for s in out if s.domain == d])) % len(queue)]
            rep = len([s for s in out if s.domain == d]) // len(queue)
            out.append(Scenario(f"{d}-{index}" + (f"-r{rep}" if rep else ""), text, d, "", "taxonomy",
                                metadata={"pattern": pattern}))
        rounds += 1
    return out
