"""Settings from the environment, read once and validated at start.

Every process (gunicorn workers, the Dagster daemon and webserver, the CLI) builds the same
`Settings` from the same variables, so one misconfigured variable fails loudly in all of them
with the same message instead of surfacing later as a confusing runtime error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from transforms.sealing import MIN_INSTANCE_KEY_CHARS
from transforms.webhooks.urls import INTEGRATIONS_PRIVATE_HOSTS_ENV
from transforms.webhooks.urls import private_hosts as parse_private_hosts
from warehouse.paths import DataPaths, LakeUrlError, check_lake_url

SURFACES = ("v1", "gateway", "ingest", "processor", "dashboard")
GOOGLE_PLAY_API_URL = "https://androidpublisher.googleapis.com"
GOOGLE_OIDC_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable and what is expected."""


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise SettingsError(f"{name} must be a TCP port between 1 and 65535, got {raw!r}")
    return int(raw)


def _surfaces(env: Mapping[str, str]) -> tuple[str, ...]:
    raw = env.get("FLOKIT_SURFACES", "").strip()
    if not raw:
        return SURFACES
    chosen = tuple(dict.fromkeys(s.strip() for s in raw.split(",") if s.strip()))
    unknown = [s for s in chosen if s not in SURFACES]
    if unknown or not chosen:
        raise SettingsError(f"FLOKIT_SURFACES must be a comma-separated subset of {','.join(SURFACES)}, got {raw!r}")
    return chosen


def _flag(env: Mapping[str, str], name: str, *, default: bool = False) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise SettingsError(f"{name} must be 1 or 0, got {raw!r}")


def private_hosts(env: Mapping[str, str], name: str = INTEGRATIONS_PRIVATE_HOSTS_ENV) -> tuple[str, ...]:
    """`transforms.webhooks.urls.private_hosts`, refusing as settings do (SettingsError)."""
    try:
        return parse_private_hosts(env, name)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _files(env: Mapping[str, str], name: str) -> tuple[Path, ...]:
    """Comma-separated paths of files that must exist (read when first needed)."""
    paths = tuple(Path(p.strip()).expanduser().resolve() for p in env.get(name, "").split(",") if p.strip())
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SettingsError(f"{name} names files that do not exist: {', '.join(missing)}")
    return paths


def _positive_number(env: Mapping[str, str], name: str, default: float, *, allow_zero: bool = False) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise SettingsError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} number, got {raw!r}")
    return value


def _count(env: Mapping[str, str], name: str, default: int, minimum: int, maximum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not minimum <= int(raw) <= maximum:
        raise SettingsError(f"{name} must be a whole number from {minimum} to {maximum}, got {raw!r}")
    return int(raw)


# The data directory holds the database, its webhook signing secrets and the app-session secret:
# FloKit creates it owner-only, and `flokit up` / `flokit db upgrade` tighten an existing one.
DATA_DIR_MODE = 0o700
MAX_BODY_BYTES = 1024 * 1024
APP_SESSION_SECRET_FILE = "app-session.secret"  # noqa: S105  (a file name, not a secret)
# The instance key's file in the data directory, created by `flokit db upgrade` when
# FLOKIT_SECRET_KEY is not set (warehouse/instance_key.py).
INSTANCE_KEY_FILE = "instance.key"
MIN_APP_SESSION_SECRET = 32


# Rate limits (api/ratelimits.py): `limits` notation ("100/second", "100/10 seconds", several
# joined by ";"), or "off". Defaults a busy production app does not reach, except failed
# authentications: an address gets at most 100 per 10 seconds on any surface.
RATE_LIMIT_DEFAULTS = {
    "api_key": "100/second",
    "app_client": "1000/second",
    "ingest_token": "2000/second",
    "address": "1000/second",
    "auth_failures": "100/10 seconds",
}


def _rate_limit(env: Mapping[str, str], kind: str) -> str:
    name = f"FLOKIT_RATE_LIMIT_{kind.upper()}"
    raw = " ".join(env.get(name, "").split()) or RATE_LIMIT_DEFAULTS[kind]
    if raw == "off":
        return raw
    from limits import parse_many  # here: only a process that reads its settings needs it

    try:
        items = parse_many(raw)
    except ValueError:
        items = []
    if not items or any(item.amount < 1 for item in items):
        raise SettingsError(
            f'{name} must be a rate such as "100/second" or "100/10 seconds" (several joined by ";"), or off; '
            f"got {raw!r}"
        )
    return raw


def _rate_limit_storage(env: Mapping[str, str]) -> str:
    raw = env.get("FLOKIT_RATE_LIMIT_STORAGE", "").strip() or "memory://"
    if raw != "memory://" and not raw.startswith(("redis://", "rediss://")):
        raise SettingsError(f"FLOKIT_RATE_LIMIT_STORAGE must be memory:// or a redis:// (rediss://) URL, got {raw!r}")
    return raw


def _secret(env: Mapping[str, str], name: str, path: Path, minimum: int, hint: str = "") -> str | None:
    """The variable `name`, else the file at `path` (kept in the data directory), else None; at
    least `minimum` characters wherever it comes from."""
    raw, source = env.get(name, "").strip(), name
    if not raw:
        raw, source = (path.read_text().strip() if path.is_file() else ""), str(path)
    if raw and len(raw) < minimum:
        raise SettingsError(f"{source} must be at least {minimum} characters of random text{hint}")
    return raw or None


def _app_session_secret(env: Mapping[str, str], data_dir: Path) -> str | None:
    """FLOKIT_APP_SESSION_SECRET, else the secret `flokit up` keeps in the data directory, else
    None (token minting not configured: POST /api/paywall/token answers 503)."""
    return _secret(env, "FLOKIT_APP_SESSION_SECRET", data_dir / APP_SESSION_SECRET_FILE, MIN_APP_SESSION_SECRET)


def instance_key_for(env: Mapping[str, str], data_dir: Path) -> str | None:
    """FLOKIT_SECRET_KEY, else the key file `flokit db upgrade` created in the data directory,
    else None (nothing sealed can be written or read until `flokit db upgrade` runs)."""
    hint = " (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
    return _secret(env, "FLOKIT_SECRET_KEY", data_dir / INSTANCE_KEY_FILE, MIN_INSTANCE_KEY_CHARS, hint)


def _lake_url(env: Mapping[str, str]) -> str:
    try:
        return check_lake_url(env.get("FLOKIT_LAKE_URL", "").strip())
    except LakeUrlError as exc:
        raise SettingsError(str(exc)) from None


def _http_url(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.startswith(("http://", "https://")) or len(raw) < len("http://x"):
        raise SettingsError(f"{name} must be an http:// or https:// URL, got {raw!r}")
    return raw.rstrip("/")


def _database_url(env: Mapping[str, str], data_dir: Path) -> str:
    raw = env.get("FLOKIT_DATABASE_URL", "").strip()
    if not raw:
        return f"sqlite:///{data_dir / 'flokit.db'}"
    if raw.startswith("sqlite:///") or raw.startswith("postgresql+psycopg://"):
        return raw
    if raw.startswith(("postgresql://", "postgres://")):
        raise SettingsError(
            "FLOKIT_DATABASE_URL must name the psycopg 3 driver: write postgresql+psycopg://… "
            f"instead of {raw.split('://', 1)[0]}://…"
        )
    raise SettingsError(
        f"FLOKIT_DATABASE_URL must be sqlite:///<path> or postgresql+psycopg://user@host/db, got {raw!r}"
    )


RUN_LAUNCHERS = ("local", "celery")
# The schema of FloKit's own PostgreSQL database that holds the Dagster instance when
# FLOKIT_DAGSTER_DATABASE_URL is not set: Dagster's storages stamp their Alembic revision in an
# `alembic_version` table, which FloKit's migrations use too, so the two may share a database but
# never a schema.
DAGSTER_SCHEMA = "dagster"


def _run_launcher(env: Mapping[str, str]) -> str:
    raw = env.get("FLOKIT_RUN_LAUNCHER", "").strip().lower() or "local"
    if raw not in RUN_LAUNCHERS:
        raise SettingsError(f"FLOKIT_RUN_LAUNCHER must be local or celery, got {raw!r}")
    return raw


def _redis_url(env: Mapping[str, str], name: str) -> str | None:
    """A redis:// (rediss://) URL, or None; the message never repeats the value (it may hold a password)."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.startswith(("redis://", "rediss://")) or len(raw.split("://", 1)[1]) == 0:
        raise SettingsError(f"{name} must be a redis:// or rediss:// URL (e.g. redis://127.0.0.1:6379/1)")
    return raw


def redis_db_after(url: str) -> str:
    """The same Redis server with the next database number (/1 -> /2; /15, the last, -> /14): the
    Celery results default beside the broker's messages (docs/deploy.md)."""
    head, _, query = url.partition("?")
    scheme, rest = head.split("://", 1)
    host, _, path = rest.partition("/")
    number = int(path) if path.isdigit() else 0
    after = number + 1 if number < 15 else number - 1
    return f"{scheme}://{host}/{after}" + (f"?{query}" if query else "")


def _dagster_database_url(env: Mapping[str, str], database_url: str) -> str | None:
    """Where the Dagster instance lives when not on SQLite under DAGSTER_HOME: FLOKIT_DAGSTER_DATABASE_URL,
    else FloKit's own PostgreSQL database (its `dagster` schema). Always psycopg2's spelling:
    dagster-postgres speaks psycopg2, and SQLAlchemy maps a bare postgresql:// to psycopg 3, with
    which its `NOTIFY run_events, $1` fails (deploy/dagster.yaml)."""
    raw = env.get("FLOKIT_DAGSTER_DATABASE_URL", "").strip()
    if raw:
        scheme, sep, rest = raw.partition("://")
        if not sep or not rest or scheme not in ("postgres", "postgresql", "postgresql+psycopg", "postgresql+psycopg2"):
            raise SettingsError(
                "FLOKIT_DAGSTER_DATABASE_URL must be a PostgreSQL URL, postgresql+psycopg2://user@host/db"
            )
        return f"postgresql+psycopg2://{rest}"
    if not database_url.startswith("postgresql+psycopg://"):
        return None
    rest = database_url.split("://", 1)[1]
    joiner = "&" if "?" in rest else "?"
    return f"postgresql+psycopg2://{rest}{joiner}options=-csearch_path%3D{DAGSTER_SCHEMA}"


@dataclass(frozen=True)
class CelerySettings:
    """FLOKIT_RUN_LAUNCHER=celery: each Dagster run is a Celery task on a worker host."""

    broker_url: str = field(repr=False)
    result_url: str = field(repr=False)


def _celery(env: Mapping[str, str], launcher: str, dagster_database_url: str | None) -> CelerySettings | None:
    broker = _redis_url(env, "FLOKIT_CELERY_BROKER_URL")
    result = _redis_url(env, "FLOKIT_CELERY_RESULT_URL")
    if launcher != "celery":
        return None
    if broker is None:
        raise SettingsError("FLOKIT_RUN_LAUNCHER=celery needs FLOKIT_CELERY_BROKER_URL (redis://host:6379/1)")
    if dagster_database_url is None:
        raise SettingsError(
            "FLOKIT_RUN_LAUNCHER=celery needs the Dagster instance on PostgreSQL, which every worker host "
            "shares: set FLOKIT_DATABASE_URL to PostgreSQL or FLOKIT_DAGSTER_DATABASE_URL"
        )
    return CelerySettings(broker_url=broker, result_url=result or redis_db_after(broker))


@dataclass(frozen=True)
class Settings:
    """The service's configuration. Tests construct it directly; processes use `from_env`."""

    data_dir: Path
    database_url: str
    surfaces: tuple[str, ...] = SURFACES
    api_port: int = 8000
    dagster_port: int = 3000
    dagster_home: Path = field(default=Path())
    # Request bodies above this are answered 413 before any handler reads them. The largest
    # legitimate body is a batch of 50 paywall events, far below 1 MiB.
    max_body_bytes: int = MAX_BODY_BYTES
    # Webhook endpoints may be http:// and resolve to private/loopback addresses (dev and tests).
    webhooks_allow_private: bool = False
    # Hosts an integration or ad account may be pointed at although they resolve to private or
    # loopback addresses (and reached over plain http); every other address must be public.
    integrations_allow_private_hosts: tuple[str, ...] = ()
    # Multiplier on the webhook retry delays (30 s ... 6 h); tests shrink it, 0 retries at once.
    webhook_backoff_scale: float = 1.0
    # Reverse proxies in front of the ingest gateway that append to X-Forwarded-For. 0: the
    # socket peer is the client (a header sent by a direct caller is ignored, never trusted).
    trusted_proxies: int = 0
    # Minimum seconds between evaluations of FloKit's queue sensors (landed events, webhook
    # deliveries); the daemon itself evaluates sensors at most about every 5 s.
    sensor_interval_s: int = 5
    # Seconds each long-lived webhook drain run lives before it exits and the sensor relaunches
    # its slot (docs/webhooks.md "Delivery"); 0: one short run per batch of due deliveries, as
    # before issue 36 (seconds of latency: a sensor tick plus a run launch per batch).
    webhook_drain_lifetime_s: float = 900.0
    # Where provider webhooks are forwarded (the path is appended); None: answered 502.
    passthrough_url: str | None = None
    # Spec limits: gateway downstream timeout 10 s, then 504.
    passthrough_timeout_s: float = 10.0
    # Seconds a gateway worker keeps a paywall's live configuration before reading it again
    # (a publish reaches every worker within this); 0: read on every request.
    config_cache_s: float = 1.0
    # Apple's root certificates (DER or PEM files) that App Store JWS chains must end at; none
    # configured: iOS receipts and notifications cannot be verified (422 / 401 saying so).
    apple_root_certs: tuple[Path, ...] = ()
    # The App Store library's OCSP revocation checks of the JWS chain (network calls to Apple).
    apple_online_checks: bool = True
    # The Google Play Developer API's address (tests point it at a local fake).
    google_play_api_url: str = GOOGLE_PLAY_API_URL
    # Where Google's OIDC signing certificates are read, to verify Pub/Sub push tokens.
    google_oidc_certs_url: str = GOOGLE_OIDC_CERTS_URL
    # Signs app-session tokens; None: minting is not configured here (503).
    app_session_secret: str | None = field(default=None, repr=False)
    # The one instance key every sealed secret is derived from (transforms/sealing.py); None
    # until FLOKIT_SECRET_KEY is set or `flokit db upgrade` has created the key file.
    instance_key: str | None = field(default=None, repr=False)
    # Seconds a client has to send a request head, then its body, before a 408 (api/workers.py).
    header_timeout_s: float = 10.0
    body_timeout_s: float = 15.0
    # Threads serving whole requests in each gunicorn worker (1: its event loop serves them).
    worker_threads: int = 1
    # Where rate-limit counters live: memory:// (per worker process) or redis:// (shared, exact).
    rate_limit_storage: str = "memory://"
    # One rate per kind of limit (RATE_LIMIT_DEFAULTS; "off" disables one).
    rate_limit_api_key: str = RATE_LIMIT_DEFAULTS["api_key"]
    rate_limit_app_client: str = RATE_LIMIT_DEFAULTS["app_client"]
    rate_limit_ingest_token: str = RATE_LIMIT_DEFAULTS["ingest_token"]
    rate_limit_address: str = RATE_LIMIT_DEFAULTS["address"]
    rate_limit_auth_failures: str = RATE_LIMIT_DEFAULTS["auth_failures"]
    # Where the lake, the published reports and the analyst catalog live (FLOKIT_LAKE_URL):
    # "" is the data directory's `lake/`; file:///path another directory; s3://bucket/prefix an
    # object store, reached with the standard AWS variables (warehouse/objects.py).
    lake_url: str = ""
    # Where Dagster runs: "local" (a process on the daemon's host) or "celery" (`celery` below).
    run_launcher: str = "local"
    celery: CelerySettings | None = None
    # The Dagster instance's PostgreSQL (psycopg2 URL); None: SQLite under DAGSTER_HOME.
    dagster_database_url: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.dagster_home == Path():
            object.__setattr__(self, "dagster_home", self.data_dir / "dagster")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        data_dir = Path(env.get("FLOKIT_DATA_DIR", "").strip() or "data").expanduser().resolve()
        if data_dir.exists() and not data_dir.is_dir():
            raise SettingsError(f"FLOKIT_DATA_DIR must be a directory, {data_dir} is a file")
        dagster_home = env.get("DAGSTER_HOME", "").strip()
        database_url = _database_url(env, data_dir)
        launcher = _run_launcher(env)
        dagster_database_url = _dagster_database_url(env, database_url)
        return cls(
            data_dir=data_dir,
            database_url=database_url,
            run_launcher=launcher,
            celery=_celery(env, launcher, dagster_database_url),
            dagster_database_url=dagster_database_url,
            surfaces=_surfaces(env),
            api_port=_port(env, "FLOKIT_API_PORT", 8000),
            dagster_port=_port(env, "FLOKIT_DAGSTER_PORT", 3000),
            trusted_proxies=_count(env, "FLOKIT_TRUSTED_PROXIES", 0, 0, 10),
            dagster_home=Path(dagster_home).expanduser().resolve() if dagster_home else data_dir / "dagster",
            webhooks_allow_private=_flag(env, "FLOKIT_WEBHOOKS_ALLOW_PRIVATE"),
            integrations_allow_private_hosts=private_hosts(env),
            webhook_backoff_scale=_positive_number(env, "FLOKIT_WEBHOOK_BACKOFF_SCALE", 1.0, allow_zero=True),
            sensor_interval_s=max(1, round(_positive_number(env, "FLOKIT_SENSOR_INTERVAL_S", 5))),
            webhook_drain_lifetime_s=_positive_number(env, "FLOKIT_WEBHOOK_DRAIN_LIFETIME_S", 900.0, allow_zero=True),
            app_session_secret=_app_session_secret(env, data_dir),
            instance_key=instance_key_for(env, data_dir),
            passthrough_url=_http_url(env, "FLOKIT_PASSTHROUGH_URL"),
            apple_root_certs=_files(env, "FLOKIT_APPLE_ROOT_CERTS"),
            apple_online_checks=_flag(env, "FLOKIT_APPLE_ONLINE_CHECKS", default=True),
            google_play_api_url=_http_url(env, "FLOKIT_GOOGLE_PLAY_API_URL") or GOOGLE_PLAY_API_URL,
            google_oidc_certs_url=_http_url(env, "FLOKIT_GOOGLE_OIDC_CERTS_URL") or GOOGLE_OIDC_CERTS_URL,
            config_cache_s=_positive_number(env, "FLOKIT_CONFIG_CACHE_S", 1.0, allow_zero=True),
            passthrough_timeout_s=_positive_number(env, "FLOKIT_PASSTHROUGH_TIMEOUT_S", 10.0),
            header_timeout_s=_positive_number(env, "FLOKIT_HEADER_TIMEOUT_S", 10.0),
            body_timeout_s=_positive_number(env, "FLOKIT_BODY_TIMEOUT_S", 15.0),
            worker_threads=_count(env, "FLOKIT_WORKER_THREADS", 1, 1, 256),
            rate_limit_storage=_rate_limit_storage(env),
            rate_limit_api_key=_rate_limit(env, "api_key"),
            rate_limit_app_client=_rate_limit(env, "app_client"),
            rate_limit_ingest_token=_rate_limit(env, "ingest_token"),
            rate_limit_address=_rate_limit(env, "address"),
            rate_limit_auth_failures=_rate_limit(env, "auth_failures"),
            lake_url=_lake_url(env),
        )

    def rate_limits(self) -> dict[str, str]:
        """Each kind of rate limit and its rate (or "off")."""
        return {kind: getattr(self, f"rate_limit_{kind}") for kind in RATE_LIMIT_DEFAULTS}

    @property
    def paths(self) -> DataPaths:
        return DataPaths(self.data_dir, self.lake_url)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def child_env(self) -> dict[str, str]:
        """The variables that make a child process build exactly these settings."""
        env = {
            "FLOKIT_DATA_DIR": str(self.data_dir),
            "FLOKIT_DATABASE_URL": self.database_url,
            "FLOKIT_SURFACES": ",".join(self.surfaces),
            "FLOKIT_API_PORT": str(self.api_port),
            "FLOKIT_DAGSTER_PORT": str(self.dagster_port),
            "DAGSTER_HOME": str(self.dagster_home),
            "FLOKIT_WEBHOOKS_ALLOW_PRIVATE": "1" if self.webhooks_allow_private else "0",
            "FLOKIT_WEBHOOK_BACKOFF_SCALE": repr(self.webhook_backoff_scale),
            "FLOKIT_TRUSTED_PROXIES": str(self.trusted_proxies),
            "FLOKIT_SENSOR_INTERVAL_S": str(self.sensor_interval_s),
            "FLOKIT_WEBHOOK_DRAIN_LIFETIME_S": repr(self.webhook_drain_lifetime_s),
            "FLOKIT_PASSTHROUGH_URL": self.passthrough_url or "",
            "FLOKIT_APPLE_ROOT_CERTS": ",".join(str(p) for p in self.apple_root_certs),
            "FLOKIT_APPLE_ONLINE_CHECKS": "1" if self.apple_online_checks else "0",
            "FLOKIT_GOOGLE_PLAY_API_URL": self.google_play_api_url,
            "FLOKIT_GOOGLE_OIDC_CERTS_URL": self.google_oidc_certs_url,
            "FLOKIT_CONFIG_CACHE_S": repr(self.config_cache_s),
            "FLOKIT_PASSTHROUGH_TIMEOUT_S": repr(self.passthrough_timeout_s),
            "FLOKIT_HEADER_TIMEOUT_S": repr(self.header_timeout_s),
            "FLOKIT_BODY_TIMEOUT_S": repr(self.body_timeout_s),
            "FLOKIT_WORKER_THREADS": str(self.worker_threads),
            "FLOKIT_RATE_LIMIT_STORAGE": self.rate_limit_storage,
            "FLOKIT_LAKE_URL": self.lake_url,
        }
        env |= {f"FLOKIT_RATE_LIMIT_{kind.upper()}": rate for kind, rate in self.rate_limits().items()}
        env["FLOKIT_RUN_LAUNCHER"] = self.run_launcher
        if self.celery is not None:
            env["FLOKIT_CELERY_BROKER_URL"] = self.celery.broker_url
            env["FLOKIT_CELERY_RESULT_URL"] = self.celery.result_url
        if self.dagster_database_url is not None:
            env["FLOKIT_DAGSTER_DATABASE_URL"] = self.dagster_database_url
        if self.app_session_secret:
            env["FLOKIT_APP_SESSION_SECRET"] = self.app_session_secret
        if self.integrations_allow_private_hosts:  # else the child keeps its environment's (the test suite's)
            env[INTEGRATIONS_PRIVATE_HOSTS_ENV] = ",".join(self.integrations_allow_private_hosts)
        return env
