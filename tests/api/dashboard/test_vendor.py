"""The vendored dashboard assets are exactly the pinned npm files the manifest names.

A hand edit to a vendored file, a file copied in without `scripts/vendor-js.py`, or a manifest
entry whose file is gone all fail here, so what the browser runs is what the registry published.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import api

VENDOR = Path(api.__file__).parent / "dashboard" / "static" / "vendor"
MANIFEST = json.loads((VENDOR / "MANIFEST.json").read_text())


def test_every_vendored_file_matches_its_manifest_hash() -> None:
    for name, entry in MANIFEST.items():
        data = (VENDOR / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name


def test_the_folder_holds_only_manifest_files() -> None:
    present = {path.name for path in VENDOR.iterdir()} - {"MANIFEST.json"}
    assert present == set(MANIFEST)


def test_names_carry_the_pinned_version_and_the_registry_integrity_is_recorded() -> None:
    for name, entry in MANIFEST.items():
        assert entry["version"] in name, name
        assert re.fullmatch(r"sha512-[A-Za-z0-9+/]{86}==", entry["npm_integrity"]), name
        assert entry["licence"] in {"MIT", "0BSD"}, name
