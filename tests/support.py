"""Helpers shared by tests: free ports, waiting for real servers, running real processes."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check: Callable[[], bool], timeout: float, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: process exited with {process.returncode}")
        try:
            if check():
                return
        except (requests.ConnectionError, requests.Timeout):
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def http_ok(url: str) -> Callable[[], bool]:
    return lambda: requests.get(url, timeout=2).status_code == 200
