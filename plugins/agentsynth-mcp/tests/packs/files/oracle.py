"""Reference solutions for the mcp-files-test pack."""

ORACLE = {
    "greeting": [{"tool": "write_file", "arguments": {"path": "out/greeting.txt", "text": "hello from the agent"}},
                 {"answer": "Written."}],
    "mode": [{"tool": "write_file", "arguments": {"path": "settings.json",
                                                  "text": '{"mode": "production", "name": "demo"}'}},
             {"answer": "Set."}],
    "add-item": [{"tool": "sql", "arguments": {"query": "INSERT INTO items (name) VALUES ('widget')"}},
                 {"answer": "Added."}],
    "save-note": [{"tool": "write_file", "arguments": {"path": "notes/todo.txt", "text": "buy milk"}},
                  {"answer": "Saved."}],
}
