"""`flokit catalog pull`: the analyst catalog as one self-contained DuckDB file, wherever the lake is."""

from __future__ import annotations

from pathlib import Path

import click

from cli.context import App, json_option, pass_app
from warehouse.analyst_views import ANALYST_VIEWS
from warehouse.catalog import published_views, pull_catalog
from warehouse.objects import StoreUnavailable


@click.group()
def catalog() -> None:
    """The analyst catalog (warehouse.duckdb)."""


@catalog.command("pull")
@click.option(
    "--dir",
    "directory",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write warehouse.duckdb (created if missing; an existing file is replaced atomically).",
)
@json_option
@pass_app
def pull(app: App, directory: Path) -> None:
    """Write DIR/warehouse.duckdb: every catalog view as a table with its comments and the lake's
    current rows. It opens from any directory with no AWS settings (`duckdb DIR/warehouse.duckdb`).

    With the lake in an object store (FLOKIT_LAKE_URL=s3://…), the views are the ones the last
    refresh published; on a local lake, this FloKit's views (the data directory's own
    warehouse.duckdb reads the lake in place and needs no pull)."""
    paths = app.settings.paths
    store = paths.object_store()
    destination = directory.expanduser().resolve() / "warehouse.duckdb"
    try:
        views = published_views(store) if store is not None else list(ANALYST_VIEWS)
        counts = pull_catalog(paths.lake(), views, destination)
    except StoreUnavailable as exc:
        app.fail(f"catalog not pulled: {exc}")
    source = str(store) if store is not None else str(paths.lake_dir)
    lines = [f"{destination}: {len(counts)} tables from {source}"]
    lines += [f"  {name:<18} {rows:>10} rows" for name, rows in counts.items()]
    app.emit({"path": str(destination), "source": source, "rows": counts}, "\n".join(lines))
