"""The instance key's file: created once, owner-only, never rewritten.

Every secret FloKit keeps at rest is sealed with a key derived from the instance key
(`transforms.sealing`). It comes from FLOKIT_SECRET_KEY, or from `<data dir>/instance.key`,
which `flokit db upgrade` creates the first time (mode 0600, exclusive create, so two upgrades
racing cannot end with two keys). Losing the file loses every sealed secret, which is why it is
never replaced: back it up with the database.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from transforms.sealing import KEY_BYTES
from warehouse.settings import INSTANCE_KEY_FILE, Settings

KEY_FILE_MODE = 0o600


def ensure_instance_key(settings: Settings) -> Path | None:
    """The key file in use, created when neither it nor FLOKIT_SECRET_KEY exists; None when the
    key comes from FLOKIT_SECRET_KEY."""
    path = settings.data_dir / INSTANCE_KEY_FILE
    if path.is_file():
        return path
    if settings.instance_key:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_FILE_MODE)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(KEY_BYTES) + "\n")
        out.flush()
        os.fsync(out.fileno())
    return path
