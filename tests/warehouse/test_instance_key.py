"""The instance key file `flokit up` creates beside the database: made once, owner-only, never
replaced, and not made at all when FLOKIT_SECRET_KEY gives the key. Runs with each backend's
settings (the key seals secrets stored in either database), under tests/warehouse's both-backend rule."""

import dataclasses
import stat

from warehouse.instance_key import ensure_instance_key
from warehouse.settings import INSTANCE_KEY_FILE, Settings


def test_the_key_file_is_made_once_owner_only_and_never_replaced(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    path = ensure_instance_key(settings)
    assert path == settings.data_dir / INSTANCE_KEY_FILE
    key = path.read_text()
    assert len(key.strip()) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_instance_key(settings) == path and path.read_text() == key  # a restart keeps it
    assert settings.paths.logs == settings.data_dir / "logs"  # where `flokit up` writes beside it


def test_no_file_is_made_when_the_environment_gives_the_key(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    given = dataclasses.replace(settings, instance_key="k" * 44)
    assert ensure_instance_key(given) is None
    assert not (settings.data_dir / INSTANCE_KEY_FILE).exists()
