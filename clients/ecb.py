"""fx rates: the European Central Bank's euro reference rates history (`eurofxref-hist.zip`), downloaded.

Only the download lives here; what the file means and where it is kept is `warehouse.fx`
(`install` checks and stores what this returns).
"""

from __future__ import annotations

from typing import Final

import currency_converter  # type: ignore[import-untyped]  # no type information shipped
import requests

ECB_URL: Final[str] = currency_converter.ECB_URL
# The whole history is about 600 KB zipped; a minute covers a slow link.
DOWNLOAD_TIMEOUT_SECONDS: Final = 60.0
# A rates file beyond this is not the ECB's (the history is about 0.6 MB zipped, 2 MB unzipped).
MAX_DOWNLOAD_BYTES: Final = 50 * 1024 * 1024


class TooLarge(ValueError):
    """The answer grew past MAX_DOWNLOAD_BYTES: not the ECB's history, and not read further."""


def download(url: str = ECB_URL, timeout: float = DOWNLOAD_TIMEOUT_SECONDS) -> bytes:
    """The rates history's bytes, unchecked. Raises requests.RequestException or TooLarge."""
    with requests.get(url, timeout=timeout, stream=True) as response:
        response.raise_for_status()
        data = bytearray()
        for chunk in response.iter_content(64 * 1024):
            data += chunk
            if len(data) > MAX_DOWNLOAD_BYTES:
                raise TooLarge(f"more than {MAX_DOWNLOAD_BYTES} bytes")
    return bytes(data)
