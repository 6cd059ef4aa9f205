"""Report datasets in the lake, the published report store, the demo seed and catalog views."""
