"""`flokit`: migrate, administer workspaces, keys and ingest, run the whole service, refresh the warehouse."""

from __future__ import annotations

import click

from cli.actions import actions
from cli.adaccounts import ad_accounts
from cli.admin import admin
from cli.apps import apps
from cli.catalog import catalog
from cli.dagster_cmd import dagster
from cli.db import db
from cli.demo import demo
from cli.fx import fx
from cli.ingest import ingest
from cli.integrations import integrations
from cli.notifications import notifications
from cli.paywalls import paywalls
from cli.refresh import refresh
from cli.serve import serve
from cli.signing import signing_keys
from cli.up import up
from cli.webhooks import webhooks


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """FloKit: growth analytics and subscription backend."""


admin.add_command(webhooks)  # `flokit admin webhooks ...`
admin.add_command(integrations)  # `flokit admin integrations ...`
admin.add_command(paywalls)  # `flokit admin paywalls ...`
admin.add_command(apps)  # `flokit admin apps stores ...`
admin.add_command(notifications)  # `flokit admin notifications replay ...`
admin.add_command(actions)  # `flokit admin actions policy ...`
admin.add_command(ad_accounts)  # `flokit admin ad-accounts ...`
admin.add_command(signing_keys)  # `flokit admin signing-keys show|rotate`
main.add_command(db)
main.add_command(admin)
main.add_command(up)
main.add_command(serve)
main.add_command(dagster)
main.add_command(demo)
main.add_command(refresh)
main.add_command(catalog)
main.add_command(fx)
admin.add_command(ingest)


if __name__ == "__main__":
    main()
