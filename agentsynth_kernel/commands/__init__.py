"""Built-in CLI commands, one module each, imported only when invoked."""
