"""Landed canonical events: the durable hand-off from the API edge to the warehouse assets."""
