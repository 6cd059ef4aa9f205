"""`subscription_provider_a` (RevenueCat): Scheduled Data Exports (the Transactions feed) to canonical events.

RevenueCat delivers the feed into the customer's bucket as `<base>/<date>/transactions_<timestamp>
.<ext>`, gzip-compressed CSV (comma-delimited) or Parquet; the first delivery is the full history,
later ones (with "Receive new and updated transactions only") the rows new or changed since the
last (RevenueCat docs: integrations/scheduled-data-exports, …/transactions; RevenueCat/docs
bf39a9c `docs/integrations/scheduled-data-exports.mdx`). One row is one store transaction; the
columns read here are in every export version since 3, all times UTC (`2023-01-01 08:27:06`),
booleans `true`/`false` since version 4 (`t`/`f` before).

A row books the same events, under the same ids, as the API path does for the same store
transaction (`transforms.integrations.subscription_provider_a`), so a transaction both paths see
lands once, from whichever path landed it first (the export, in a sync that reads both):

- an auto-renewable row is `trial_start` (`is_trial_period`), `trial_converted`
  (`is_trial_conversion`), `subscription_start` (`renewal_number` 1; RevenueCat counts from 1,
  trials included) or `renewal`, id `rc:<store_transaction_id>:<type>`; a non-renewable one is a
  `purchase`, id `rc:<store_transaction_id>:purchase` (the API's `store_purchase_identifier`);
- a charge books `purchase_price_in_usd` (the gross, USD, still set after a refund; version 4
  on), else `price_in_usd` while nothing was refunded, as `revenue` in `USD`; a trial books
  nothing, nor does a `promotional` grant (the API path books neither);
- `refunded_at` is a `refund` at that time (which the API cannot date), id
  `rc:<store_transaction_id>:refund`, of the refunded part: `purchase_price_in_usd` less what
  `price_in_usd` still holds after "full and partial refunds";
- `unsubscribe_detected_at` is a `cancellation` at that time, one per subscription, id
  `rc:<original_store_transaction_id>:cancellation` (the API path names it by the same first
  store transaction);
- `is_sandbox` rows are left out.

Stores the API lists no transactions for (Stripe, Web Billing, Amazon, ...) are another matter:
there the API knows only a subscription's first and current periods and names them by its own
subscription id, which the export does not carry. Their rows are keyed `rc:<store_transaction_id>:
<renewal_number>:<type>` (RevenueCat: `store_transaction_id` is not unique for Stripe, the pair
with `renewal_number` is), and with exports configured the connector leaves those subscriptions
to the export alone.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from transforms.event_types import (
    CANCELLATION,
    PURCHASE,
    REFUND,
    RENEWAL,
    SUBSCRIPTION_START,
    TRIAL_CONVERTED,
    TRIAL_START,
)
from transforms.events import CanonicalEvent
from transforms.integrations.subscription_provider_a import STORES_WITH_TRANSACTIONS, Mapper

# `<date>/transactions_<timestamp>.<ext>`: the Transactions feed only (the In-App Currency feed
# and anything else a customer keeps in the bucket are not transactions).
_TRANSACTIONS_FILE = re.compile(r"(?:^|/)transactions_[^/]*\.(?:csv|csv\.gz|parquet)$", re.IGNORECASE)
REQUIRED = ("rc_original_app_user_id", "store_transaction_id", "start_time", "store")
_TRUE = frozenset({"true", "t", "1", "yes"})
_FALSE = frozenset({"false", "f", "0", "no"})


class ExportProblem(ValueError):
    """A file that cannot be read as a Transactions export (the message says where)."""


def is_transactions_file(key: str) -> bool:
    return bool(_TRANSACTIONS_FILE.search(key))


def read_transactions(key: str, data: bytes) -> list[dict[str, Any]]:
    """The rows of one delivered file: gzip or plain CSV, or Parquet, by its content (the
    extension can lie; a `.csv.gz` that is not gzip is read as CSV). Empty cells are left out."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ExportProblem(f"a broken gzip file: {exc}") from None
    if data[:4] == b"PAR1":
        try:
            frame = pl.read_parquet(io.BytesIO(data))
        except Exception as exc:  # polars raises its own errors for every kind of bad file
            raise ExportProblem(f"not a readable Parquet file: {type(exc).__name__}: {exc}") from None
        _require(frame.columns)
        return [{k: v for k, v in row.items() if v is not None and v != ""} for row in frame.iter_rows(named=True)]
    if key.lower().endswith(".parquet"):
        raise ExportProblem("named .parquet but not a Parquet file")
    return _read_csv(data)


def _read_csv(data: bytes) -> list[dict[str, Any]]:
    if not data.strip():
        return []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExportProblem(f"not UTF-8 text (byte {exc.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[dict[str, Any]] = []
    try:
        header = [name.strip() for name in next(reader)]
        _require(header)
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise ExportProblem(f"line {reader.line_num} has {len(row)} fields, the header has {len(header)}")
            rows.append({name: value for name, value in zip(header, row, strict=True) if value != ""})
    except csv.Error as exc:
        raise ExportProblem(f"not valid CSV at line {reader.line_num}: {exc}") from None
    return rows


def _require(columns: Sequence[str]) -> None:
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise ExportProblem(f"not a Transactions export: no column {', '.join(missing)}")


def parse_time(value: object) -> datetime | None:
    """`2023-01-01 08:27:06` (UTC, the CSV), ISO 8601 with an offset, or a Parquet timestamp."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip().replace("Z", "+00:00")
    if text.endswith(" UTC"):
        text = text[:-4]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE:
        return True
    if isinstance(value, str) and value.strip().lower() not in _FALSE and value.strip():
        raise ValueError(f"not a boolean: {value!r}")
    return False


def parse_number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value) if isinstance(value, int | float | str) else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


@dataclass
class MappedExport:
    """The events of one file's rows, and how many rows were left out for each reason."""

    events: list[CanonicalEvent] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


class ExportMapper(Mapper):
    """The API path's `Mapper`, reading export rows: same workspace, source, `now` and ids."""

    def transactions(self, rows: Iterable[Mapping[str, Any]]) -> MappedExport:
        out = MappedExport()
        for row in rows:
            try:
                events, reason = self.transaction(row)
            except ValueError:
                events, reason = [], "unreadable_value"
            out.events.extend(events)
            if reason:
                out.skipped[reason] += 1
        return out

    def transaction(self, row: Mapping[str, Any]) -> tuple[list[CanonicalEvent], str | None]:
        """One row's events, or none and the reason it was left out."""
        txn = _text(row.get("store_transaction_id"))
        user = _text(row.get("rc_last_seen_app_user_id_alias")) or _text(row.get("rc_original_app_user_id"))
        start = parse_time(row.get("start_time"))
        store = _text(row.get("store"))
        if txn is None or user is None or start is None or store is None:
            return [], "missing_id_or_time"
        if parse_flag(row.get("is_sandbox")):
            return [], "sandbox"
        if start > self.now:
            return [], "in_the_future"
        record = {"store": store, "country": _text(row.get("country"))}
        original = _text(row.get("original_store_transaction_id")) or txn
        product = _text(row.get("product_identifier"))
        renewable = parse_flag(row.get("is_auto_renewable")) if "is_auto_renewable" in row else True
        trial = parse_flag(row.get("is_trial_period"))
        gross = parse_number(row.get("purchase_price_in_usd"))
        left = parse_number(row.get("price_in_usd"))
        refunded = parse_time(row.get("refunded_at"))
        charge = gross if gross is not None else (left if refunded is None else None)
        booked = None if trial or store == "promotional" else charge
        money = {"revenue": booked, "currency": "USD" if booked is not None else None}
        base: dict[str, Any] = {"product_id": product, "store": store, "original_transaction_id": original}

        if not renewable:
            raw = txn
            kind = PURCHASE
            props = base | {"purchase_id": txn}
        else:
            number = parse_number(row.get("renewal_number"))
            if trial:
                kind = TRIAL_START
            elif parse_flag(row.get("is_trial_conversion")):
                kind = TRIAL_CONVERTED
            elif number == 1 or (number is None and original == txn):
                kind = SUBSCRIPTION_START
            else:
                kind = RENEWAL
            keyed = store in STORES_WITH_TRANSACTIONS
            raw = txn if keyed else f"{txn}:{int(number) if number is not None else 0}"
            props = dict(base)
        candidates = [self._event(raw, kind, start, record, user, props | money)]
        if refunded is not None and not trial:
            refund = None if charge is None else _refunded_part(charge, left)
            candidates.append(
                self._event(
                    raw,
                    REFUND,
                    refunded,
                    record,
                    user,
                    props | {"revenue": refund, "currency": "USD" if refund is not None else None},
                )
            )
        unsubscribed = parse_time(row.get("unsubscribe_detected_at"))
        if renewable and unsubscribed is not None:
            candidates.append(self._event(original, CANCELLATION, unsubscribed, record, user, base))
        return [e for e in candidates if e is not None], None


def _refunded_part(gross: float, left: float | None) -> float:
    """What a refund took back: the gross less what is left after "full and partial refunds"
    (`price_in_usd`); the whole gross when nothing tells otherwise."""
    if left is not None and 0 <= left < gross:
        return round(gross - left, 2)
    return gross
