"""The HTTP edge: app factory, one blueprint per surface, auth decorators, error rendering."""
