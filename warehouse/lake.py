"""The Parquet lake: `<root>/<dataset>/date=YYYY-MM-DD/part.parquet`, written atomically.

Each file is written under a temporary name in the same directory and renamed over the live
name, so readers see either the old or the new file, never a torn one, and a crash mid-write
leaves only a temp file that the next write replaces.
"""

from __future__ import annotations

import os
import uuid
from datetime import date
from pathlib import Path

import polars as pl


class Lake:
    def __init__(self, root: Path) -> None:
        self.root = root

    def dataset_dir(self, dataset: str) -> Path:
        return self.root / dataset

    def partition_path(self, dataset: str, day: date) -> Path:
        return self.dataset_dir(dataset) / f"date={day.isoformat()}" / "part.parquet"

    def table_path(self, dataset: str) -> Path:
        """An unpartitioned dataset: one file."""
        return self.dataset_dir(dataset) / "data.parquet"

    def write(self, frame: pl.DataFrame, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            frame.write_parquet(tmp, compression="zstd", statistics=True)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def glob(self, dataset: str) -> str:
        return str(self.dataset_dir(dataset) / "**" / "*.parquet")
