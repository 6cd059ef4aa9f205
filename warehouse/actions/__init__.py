"""Growth actions: their rows, their transition history, and the demo queue."""
