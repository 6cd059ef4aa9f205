"""gunicorn's configuration for the API (`gunicorn -c api/gunicorn_conf.py`): `flokit up` and the
tests' gunicorn both run with it, so what is tested is what runs.

Limits on what gunicorn parses before the API sees a request, sized to what the API takes:

- request line 8190 bytes (gunicorn's maximum; its default is 4094): ingest callbacks are GET
  requests carrying every parameter in the query string, and vendors' templates grow;
- 100 header fields of at most 8190 bytes each (gunicorn's defaults): the largest header the API
  reads is an `Authorization: Bearer` OIDC token of a Pub/Sub push (about 1 KB), `x-app-token`
  is at most 2048 characters, a provider signature header at most 1024.

gunicorn answers what it refuses itself (414 request line too long, 431 header fields, 400
malformed, 501 transfer coding) with an HTML page; `JsonErrorWorker` answers those with the
API's JSON error shape instead: `{"error": <HTTP reason phrase>, "message": <what was wrong>}`.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from gunicorn import util
from gunicorn.workers.sync import SyncWorker

worker_class = "api.gunicorn_conf.JsonErrorWorker"
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190


class _Page:
    """Stands in for the client socket while gunicorn writes its error page, to learn its status."""

    def __init__(self) -> None:
        self.data = b""

    def gettimeout(self) -> float:
        return 0.0

    def sendall(self, data: bytes) -> None:
        self.data += data


class JsonErrorWorker(SyncWorker):
    """gunicorn's sync worker, answering the requests gunicorn refuses itself with JSON."""

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        page = _Page()
        # gunicorn decides the status, logs the error and the access line as usual; only the
        # page it writes is replaced.
        super().handle_error(req, page, addr, exc)
        try:
            status = HTTPStatus(int(page.data.split(b" ", 2)[1]))
        except (ValueError, IndexError):
            status = HTTPStatus.INTERNAL_SERVER_ERROR
        # The standard phrase: gunicorn's page says "Bad Request" with its 501.
        reason = status.phrase
        body = json.dumps({"error": reason, "message": self._message(status, reason, exc)}).encode()
        head = (
            f"HTTP/1.1 {status.value} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        try:
            util.write_nonblock(client, head.encode("latin-1") + body)
        except Exception:  # the client is gone, as gunicorn's own page would have found
            self.log.debug("Failed to send error message.")

    def _message(self, status: int, reason: str, exc: BaseException) -> str:
        if status == 414:
            return (
                f"The request line (method, path and query string) is longer than {self.cfg.limit_request_line} bytes"
            )
        if status == 431:
            return (
                f"At most {self.cfg.limit_request_fields} header fields of at most "
                f"{self.cfg.limit_request_field_size} bytes each are accepted"
            )
        if status >= 500 and status != 501:
            return reason  # a server fault: nothing of its detail goes to the client
        return str(exc) or reason
