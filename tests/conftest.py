"""Fixtures shared by every test package."""

from tests.s3_server import _s3_admin, s3_bucket, s3_server

__all__ = ["_s3_admin", "s3_bucket", "s3_server"]
