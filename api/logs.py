"""Structured logs: one JSON object per line, with the request id on every request's lines."""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from typing import Any

from flask import Flask, Response, g, request

from transforms.ids import new_id

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# A client-supplied request id is echoed only if it is short and harmless in logs and headers.
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class JsonFormatter(logging.Formatter):
    """Every request writes one line (the access log), so the line is built with little work:
    the timestamp's seconds are formatted once per second, not once per line."""

    _second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        second, text = self._second
        if int(record.created) != second:
            second = int(record.created)
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        entry = {
            "ts": f"{text}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


# Seconds between two lines about the same kind of failure, in each process (gunicorn worker).
OUTAGE_LOG_INTERVAL_S = 10.0


class RateLimitedLog:
    """At most one warning per key and interval; each line counts the ones it replaced.

    A database outage fails every request the same way: one line (with a traceback) per request
    wrote 48-80 MB in ten seconds and buried everything else. One line per kind of failure every
    `OUTAGE_LOG_INTERVAL_S`, with `suppressed` = how many were left out since the previous line
    of that kind, tells an operator the same. A count left over when the failures stop is
    reported on the next line of that kind.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, msg: str, extra: dict[str, Any]) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < OUTAGE_LOG_INTERVAL_S:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return
            self._last[key] = now
            suppressed = self._suppressed.pop(key, 0)
        self._logger.warning(msg, extra={**extra, "suppressed": suppressed})


def configure_logging(level: int = logging.INFO) -> None:
    logger = logging.getLogger("flokit")
    if any(getattr(h, "_flokit", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler._flokit = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def register_request_logging(app: Flask) -> None:
    access = logging.getLogger("flokit.api.access")

    @app.before_request
    def _start() -> None:
        incoming = request.headers.get("X-Request-Id", "")
        g.request_id = incoming if _SAFE_REQUEST_ID.match(incoming) else new_id("req")
        g.started = time.perf_counter()

    @app.after_request
    def _finish(response: Response) -> Response:
        request_id = g.get("request_id") or new_id("req")
        response.headers["X-Request-Id"] = request_id
        access.info(
            "request",
            extra={
                "request_id": request_id,
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - g.get("started", time.perf_counter())) * 1000, 2),
            },
        )
        return response
