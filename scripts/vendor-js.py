#!/usr/bin/env python3
"""Re-vendor the dashboard's JavaScript and CSS from the npm registry, pinned, with a manifest.

A human runs this when a pin changes; nothing runs it at build or start time, so `make up` and
`make test` never need Node. `npm pack` fetches the exact tarball the registry's `dist.integrity`
names; the script checks the tarball against that digest before copying a file out of it, writes
versioned file names (so the server can cache them for a year) and records each file's sha256,
which `tests/api/dashboard/test_vendor.py` recomputes.

Usage: scripts/vendor-js.py   (needs `npm` on PATH and the npm registry reachable)
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VENDOR = Path(__file__).resolve().parent.parent / "api" / "dashboard" / "static" / "vendor"

# (npm package, version, file inside the tarball, vendored name, licence)
PINS = [
    ("htmx.org", "2.0.11", "package/dist/htmx.min.js", "htmx-2.0.11.min.js", "0BSD"),
    ("chart.js", "4.6.1", "package/dist/chart.umd.min.js", "chart-4.6.1.umd.min.js", "MIT"),
    ("@picocss/pico", "2.1.1", "package/css/pico.min.css", "pico-2.1.1.min.css", "MIT"),
]


def _npm(*args: str, cwd: Path) -> str:
    return subprocess.run(["npm", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def main() -> int:
    manifest: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for package, version, member, name, licence in PINS:
            spec = f"{package}@{version}"
            expected = _npm("view", spec, "dist.integrity", cwd=work)
            tarball = work / _npm("pack", "--silent", spec, cwd=work).splitlines()[-1]
            actual = _integrity(tarball.read_bytes())
            if actual != expected:
                print(f"{spec}: tarball {actual} != registry {expected}", file=sys.stderr)
                return 1
            with tarfile.open(tarball) as archive:
                extracted = archive.extractfile(member)
                if extracted is None:
                    print(f"{spec}: {member} is not a file", file=sys.stderr)
                    return 1
                data = extracted.read()
            (VENDOR / name).write_bytes(data)
            manifest[name] = {
                "package": package,
                "version": version,
                "source": member.removeprefix("package/"),
                "npm_integrity": expected,
                "sha256": hashlib.sha256(data).hexdigest(),
                "licence": licence,
            }
            print(f"{name}: {len(data)} bytes from {spec}")
    for stale in VENDOR.iterdir():
        if stale.name not in manifest and stale.name != "MANIFEST.json":
            stale.unlink()
            print(f"removed {stale.name}")
    (VENDOR / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
