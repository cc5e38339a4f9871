"""Fixtures shared by every test package."""

from tests.s3_server import s3_bucket, s3_server

__all__ = ["s3_bucket", "s3_server"]
