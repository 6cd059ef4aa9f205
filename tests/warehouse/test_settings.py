from pathlib import Path

import pytest

from warehouse.settings import Settings, SettingsError


def test_defaults_are_the_embedded_ones(tmp_path: Path) -> None:
    s = Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path)})
    assert s.database_url == f"sqlite:///{tmp_path / 'flokit.db'}"
    assert s.surfaces == ("v1", "gateway", "ingest", "processor", "dashboard")
    assert (s.api_port, s.dagster_port) == (8000, 3000)
    assert s.dagster_home == tmp_path / "dagster"
    assert s.paths.catalog == tmp_path / "warehouse.duckdb"


def test_every_setting_is_read(tmp_path: Path) -> None:
    s = Settings.from_env(
        {
            "FLOKIT_DATA_DIR": str(tmp_path),
            "FLOKIT_DATABASE_URL": "postgresql+psycopg://u@h/db",
            "FLOKIT_SURFACES": "ingest, v1",
            "FLOKIT_API_PORT": "9001",
            "FLOKIT_DAGSTER_PORT": "9002",
            "DAGSTER_HOME": str(tmp_path / "dh"),
        }
    )
    assert s.database_url == "postgresql+psycopg://u@h/db"
    assert s.surfaces == ("ingest", "v1")
    assert (s.api_port, s.dagster_port, s.dagster_home) == (9001, 9002, tmp_path / "dh")
    assert Settings.from_env(s.child_env()) == s


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FLOKIT_API_PORT": "eighty"}, "FLOKIT_API_PORT must be a TCP port"),
        ({"FLOKIT_DAGSTER_PORT": "70000"}, "FLOKIT_DAGSTER_PORT must be a TCP port"),
        ({"FLOKIT_SURFACES": "v1,admin"}, "FLOKIT_SURFACES must be a comma-separated subset"),
        ({"FLOKIT_SURFACES": ","}, "FLOKIT_SURFACES must be a comma-separated subset"),
        ({"FLOKIT_DATABASE_URL": "mysql://x"}, "FLOKIT_DATABASE_URL must be sqlite"),
        ({"FLOKIT_DATABASE_URL": "postgresql://u@h/db"}, "must name the psycopg 3 driver"),
    ],
)
def test_bad_settings_fail_with_a_message_naming_the_variable(env: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path), **env})


def test_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(SettingsError, match="FLOKIT_DATA_DIR must be a directory"):
        Settings.from_env({"FLOKIT_DATA_DIR": str(f)})


def test_the_app_session_secret_comes_from_the_environment_or_the_data_dir(tmp_path: Path) -> None:
    from cli.up import ensure_app_session_secret

    base = {"FLOKIT_DATA_DIR": str(tmp_path)}
    assert Settings.from_env(base).app_session_secret is None  # not configured: minting answers 503
    assert Settings.from_env(base | {"FLOKIT_APP_SESSION_SECRET": "e" * 32}).app_session_secret == "e" * 32
    with pytest.raises(SettingsError, match="FLOKIT_APP_SESSION_SECRET must be at least 32"):
        Settings.from_env(base | {"FLOKIT_APP_SESSION_SECRET": "short"})
    # `flokit up` creates one secret, owner-only, and every later process reads the same.
    made = ensure_app_session_secret(Settings.from_env(base))
    secret_file = tmp_path / "app-session.secret"
    assert made.app_session_secret and secret_file.stat().st_mode & 0o777 == 0o600
    assert Settings.from_env(base).app_session_secret == made.app_session_secret
    assert ensure_app_session_secret(Settings.from_env(base)).app_session_secret == made.app_session_secret
    assert made.child_env()["FLOKIT_APP_SESSION_SECRET"] == made.app_session_secret
    assert made.app_session_secret not in repr(made)  # never in logs


def test_the_private_hosts_integrations_may_call_are_read_and_handed_to_children(tmp_path: Path) -> None:
    s = Settings.from_env(
        {
            "FLOKIT_DATA_DIR": str(tmp_path),
            "FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS": " Proxy.Internal., 10.0.0.5,[::1]",
        }
    )
    assert s.integrations_allow_private_hosts == ("proxy.internal", "10.0.0.5", "::1")
    assert Settings.from_env(s.child_env()) == s
    with pytest.raises(SettingsError, match="FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS must list host names"):
        Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path), "FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS": "http://x"})


PG = "postgresql+psycopg://u:pw@db.internal:5432/flokit"


def test_the_run_launcher_is_local_by_default_and_dagster_stays_on_sqlite(tmp_path: Path) -> None:
    s = Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path)})
    assert (s.run_launcher, s.celery, s.dagster_database_url) == ("local", None, None)
    assert s.child_env()["FLOKIT_RUN_LAUNCHER"] == "local"
    assert "FLOKIT_DAGSTER_DATABASE_URL" not in s.child_env()


def test_dagster_goes_to_a_schema_of_flokits_postgresql_in_psycopg2s_spelling(tmp_path: Path) -> None:
    s = Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path), "FLOKIT_DATABASE_URL": PG})
    assert s.dagster_database_url == (
        "postgresql+psycopg2://u:pw@db.internal:5432/flokit?options=-csearch_path%3Ddagster"
    )
    assert Settings.from_env(s.child_env()) == s


@pytest.mark.parametrize(
    "raw",
    ["postgresql://d@h/dag", "postgres://d@h/dag", "postgresql+psycopg://d@h/dag", "postgresql+psycopg2://d@h/dag"],
)
def test_an_explicit_dagster_database_is_rewritten_to_psycopg2(raw: str, tmp_path: Path) -> None:
    s = Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path), "FLOKIT_DAGSTER_DATABASE_URL": raw})
    assert s.dagster_database_url == "postgresql+psycopg2://d@h/dag"


def test_celery_reads_the_broker_and_puts_results_in_the_next_redis_database(tmp_path: Path) -> None:
    env = {
        "FLOKIT_DATA_DIR": str(tmp_path),
        "FLOKIT_DATABASE_URL": PG,
        "FLOKIT_RUN_LAUNCHER": "celery",
        "FLOKIT_CELERY_BROKER_URL": "redis://:secret@cache:6379/1",
    }
    s = Settings.from_env(env)
    assert s.run_launcher == "celery" and s.celery is not None
    assert (s.celery.broker_url, s.celery.result_url) == (
        "redis://:secret@cache:6379/1",
        "redis://:secret@cache:6379/2",
    )
    assert "secret" not in repr(s)
    assert Settings.from_env(s.child_env()) == s
    chosen = Settings.from_env({**env, "FLOKIT_CELERY_RESULT_URL": "rediss://other:6380/5"})
    assert chosen.celery is not None and chosen.celery.result_url == "rediss://other:6380/5"


@pytest.mark.parametrize(
    ("broker", "result"),
    [("redis://h", "redis://h/1"), ("redis://h:1/0?ssl=1", "redis://h:1/1?ssl=1"), ("redis://h/15", "redis://h/14")],
)
def test_the_results_database_default(broker: str, result: str, tmp_path: Path) -> None:
    env = {"FLOKIT_DATABASE_URL": PG, "FLOKIT_RUN_LAUNCHER": "celery", "FLOKIT_CELERY_BROKER_URL": broker}
    s = Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path), **env})
    assert s.celery is not None and s.celery.result_url == result


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FLOKIT_RUN_LAUNCHER": "k8s"}, "FLOKIT_RUN_LAUNCHER must be local or celery, got 'k8s'"),
        ({"FLOKIT_RUN_LAUNCHER": "celery", "FLOKIT_DATABASE_URL": PG}, "needs FLOKIT_CELERY_BROKER_URL"),
        (
            {"FLOKIT_RUN_LAUNCHER": "celery", "FLOKIT_CELERY_BROKER_URL": "redis://h/1"},
            "needs the Dagster instance on PostgreSQL",
        ),
        ({"FLOKIT_CELERY_BROKER_URL": "amqp://guest@h//"}, "FLOKIT_CELERY_BROKER_URL must be a redis://"),
        ({"FLOKIT_CELERY_RESULT_URL": "rpc://"}, "FLOKIT_CELERY_RESULT_URL must be a redis://"),
        ({"FLOKIT_DAGSTER_DATABASE_URL": "sqlite:///x.db"}, "FLOKIT_DAGSTER_DATABASE_URL must be a PostgreSQL URL"),
    ],
)
def test_bad_run_launcher_settings_are_refused_naming_the_variable(env: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path), **env})


def test_a_refused_broker_url_is_not_repeated(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path), "FLOKIT_CELERY_BROKER_URL": "amqp://u:hunter2@h//"})
    assert "hunter2" not in str(refused.value)
