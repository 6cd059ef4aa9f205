"""Per-app state (settings and the database), reached through the Flask app, never a global."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app

from warehouse.db import Database
from warehouse.settings import Settings

EXTENSION = "flokit"


@dataclass(frozen=True)
class AppState:
    settings: Settings
    db: Database


def state() -> AppState:
    return current_app.extensions[EXTENSION]
