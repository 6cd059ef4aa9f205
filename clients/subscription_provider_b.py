"""subscription_provider_b: Adapty's daily event export, read from the customer's S3 bucket.

Adapty has no API that lists raw transactions (design/integrations.md §1.3); its S3 integration
writes the events as CSV files into a folder of the customer's bucket. Listing and reading that
folder, with S3's retries and errors, is `clients.s3.S3ExportFolder`; the sync is
`orchestration.syncs.connectors.subscription_provider_b`.
"""

from __future__ import annotations

from typing import ClassVar

from clients.s3 import S3ExportFolder


class AdaptyExportClient(S3ExportFolder):
    """The bucket folder Adapty exports to. `base_url` is the S3 endpoint (the AWS default lets
    boto pick the region's endpoint; anything else, e.g. MinIO or R2, is used as given)."""

    PROVIDER: ClassVar[str] = "Adapty S3 export"
