"""Limits on what a request body may cost a worker, enforced where the body is read.

`BoundedInput`: the request stream never truncates. Werkzeug limits a body without
Content-Length (chunked, under gunicorn, which sets `wsgi.input_terminated`) to
`max_content_length` by reading that much and stopping, so a longer body arrived cut at 1 MiB
as if it had ended there. Here the stream looks one byte past the limit: more data is 413.

`loads_json`: JSON nested more than `MAX_JSON_DEPTH` levels is refused from its text, before
`json.loads` builds anything (the parser recurses once per level, and so would any walk of the
result; 10 000 levels were a RecursionError, a 500).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import IO, Any

from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import BadRequest, HTTPException, RequestEntityTooLarge
from werkzeug.wsgi import LimitedStream, get_input_stream

# Objects and arrays, the top-level value included. Our deepest legitimate body (a v1 event's or
# a funnel event's properties) is 3-4 levels; 32 leaves room for clients' own nested properties.
MAX_JSON_DEPTH = 32


class JsonTooDeep(ValueError):
    def __init__(self) -> None:
        super().__init__(f"Request body is nested too deeply: at most {MAX_JSON_DEPTH} levels of objects and arrays")


class BoundedInput(LimitedStream):
    """`LimitedStream` up to a maximum that tells a body ending exactly at the limit from one
    that goes on: at the limit it reads one byte more, and a byte there is 413."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(stream, limit, is_max=True)

    def on_exhausted(self) -> None:
        try:
            more = self._stream.read(1)
        except (OSError, ValueError) as exc:
            self.on_disconnect(error=exc)  # ClientDisconnected
            return
        if more:
            raise RequestEntityTooLarge()

    def readall(self) -> bytes:
        data = super().readall()  # stops silently at the limit
        if self.is_exhausted:
            self.on_exhausted()
        return data


class ServerFramedInput:
    """A body the server de-chunks (`wsgi.input_terminated`): a malformed chunk raises in the
    server's reader (gunicorn's `ChunkMissingTerminator`, `InvalidChunkSize`, ...) where the
    route reads it, and was answered 500. It is the client's framing: 400."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        try:
            return self._stream.read(size)
        except (HTTPException, OSError, ValueError):
            raise  # a deadline (408) or a disconnection, which the callers tell apart
        except Exception as exc:
            raise BadRequest(f"The request body's chunked framing is malformed: {type(exc).__name__}") from exc


def input_stream(environ: dict[str, Any], max_content_length: int | None) -> IO[bytes]:
    """Werkzeug's `get_input_stream`, but a stream the server terminates (chunked bodies under
    gunicorn) is 413 past the limit instead of cut at it. A Content-Length over the limit is 413
    before anything is read, as before."""
    stream = get_input_stream(environ, max_content_length=max_content_length)
    if max_content_length is not None and "wsgi.input_terminated" in environ:
        # Where Werkzeug returned LimitedStream(wsgi.input, max_content_length, is_max=True).
        return BoundedInput(ServerFramedInput(environ["wsgi.input"]), max_content_length)  # type: ignore[arg-type,return-value]
    return stream


# A JSON string, or an unterminated one up to the end of the text (so that every quote matches
# and the scan stays linear); possessive, so it never backtracks.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"[\[{][\]}]")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON `text` nests objects and arrays more than `limit` deep, read from the text
    alone (brackets inside strings do not count). Up to the first syntax error this reads the
    text as `json.loads` does, so the parser never gets deeper than this scan saw. Linear, and
    at C speed, so even a 1 MiB body of nothing but brackets is cheap (docs/benchmarks.md)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _STRING.sub("", text).encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    rest = brackets
    for _ in range(limit):  # each pass removes the innermost level; balanced and shallow: nothing left
        rest, removed = _INNERMOST.subn(b"", rest)
        if not rest:
            return False
        if not removed:
            break
    # Too deep, or brackets that do not balance (invalid JSON): count exactly.
    return max(accumulate(map(_STEP.__getitem__, brackets))) > limit


def loads_json(data: str | bytes, **kwargs: Any) -> Any:
    """`json.loads`, but a body nested more than MAX_JSON_DEPTH deep raises `JsonTooDeep` (a
    ValueError) before it is parsed. Bytes are decoded as `json.loads` decodes them (UTF-8, 16
    or 32), so that the scan reads the same text as the parser."""
    text = data if isinstance(data, str) else data.decode(json.detect_encoding(data), "surrogatepass")
    if depth_exceeds(text):
        raise JsonTooDeep()
    try:
        return json.loads(text, **kwargs)
    except RecursionError:  # cannot happen within the depth limit; never a 500 if it does
        raise JsonTooDeep() from None


class BoundedJSONProvider(DefaultJSONProvider):
    """The app's JSON provider (`app.json`): Flask hands it to every request as its
    `json_module`, so `request.get_json` parses through `loads_json`, whichever route calls it."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads_json(s, **kwargs)
