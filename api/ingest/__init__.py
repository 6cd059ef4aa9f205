"""The measurement ingest gateway: attribution callbacks in, canonical events landed."""

from flask import Blueprint

blueprint = Blueprint("ingest", __name__)
