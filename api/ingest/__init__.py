"""The measurement ingest gateway: attribution callbacks in, canonical events landed."""

from flask import Blueprint

blueprint = Blueprint("ingest", __name__)

from api.ingest import callbacks  # noqa: E402,F401  (routes register themselves on the blueprint)
