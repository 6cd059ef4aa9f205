"""The `flokit` command: the operator's edge. It may import every room; nothing imports it."""
