"""The archive stores: a local directory and an S3-compatible bucket, both implementing
``kadence.topics.archive.ArchiveStore`` (the archiver writes archives and large payloads through
them; the readers read through them)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from kadence.topics.archive import ArchiveStore, ArchiveStoreConfig
from kadence.topics.errors import ArchiveError, ConfigError

__all__ = ["LocalArchiveStore", "S3ArchiveStore", "open_store"]


class LocalArchiveStore:
    """A directory. ``put`` writes a temporary file, fsyncs it, renames it into place and fsyncs
    the directory, so a crash leaves the old state or the complete file."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.root = Path(directory).resolve()

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ArchiveError(f"archive key {key!r} leaves the archive directory")
        return path

    def uri(self, key: str) -> str:
        return self._path(key).as_uri()

    def put(self, key: str, data: bytes) -> str:
        try:
            return self._put(key, data)
        except OSError as exc:  # a full disk, a missing permission: the store's error, typed
            raise ArchiveError(f"cannot write {self.uri(key)}: {exc}") from exc

    def _put(self, key: str, data: bytes) -> str:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return path.as_uri()

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ArchiveError(f"cannot read {self.uri(key)}: {exc}") from exc

    def list(self, prefix: str, suffix: str = ".avro") -> list[str]:
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        return sorted(
            str(p.relative_to(self.root))
            for p in base.rglob(f"*{suffix}")
            if p.is_file() and not p.name.startswith(".tmp-")
        )

    def modified(self, key: str) -> float | None:
        try:
            return self._path(key).stat().st_mtime
        except FileNotFoundError:
            return None

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass


class S3ArchiveStore:
    """An S3-compatible bucket (boto3; ``pip install 'kadence[s3]'``). A PUT is atomic in S3."""

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        client: Any = None,
    ):
        if client is None:
            try:
                import boto3
            except ImportError as exc:  # pragma: no cover - depends on the installation
                raise ConfigError("the S3 archive store needs boto3: pip install 'kadence[s3]'") from exc
            client = boto3.client("s3", endpoint_url=endpoint_url, region_name=region)
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key}"

    def put(self, key: str, data: bytes) -> str:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data)
        except Exception as exc:
            raise ArchiveError(f"cannot write {self.uri(key)}: {exc}") from exc
        return self.uri(key)

    def get(self, key: str) -> bytes | None:
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)
        except self.client.exceptions.NoSuchKey:
            return None
        except Exception as exc:
            raise ArchiveError(f"cannot read {self.uri(key)}: {exc}") from exc
        data: bytes = obj["Body"].read()
        return data

    def modified(self, key: str) -> float | None:
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self.prefix + key)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise ArchiveError(f"cannot read {self.uri(key)}: {exc}") from exc
        stamp: float = head["LastModified"].timestamp()
        return stamp

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key)
        except Exception as exc:
            raise ArchiveError(f"cannot delete {self.uri(key)}: {exc}") from exc

    def list(self, prefix: str, suffix: str = ".avro") -> list[str]:
        keys: list[str] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + prefix
            ):
                keys += [o["Key"][len(self.prefix) :] for o in page.get("Contents", ())]
        except Exception as exc:
            raise ArchiveError(f"cannot list s3://{self.bucket}/{self.prefix}{prefix}: {exc}") from exc
        return sorted(k for k in keys if k.endswith(suffix))


def open_store(config: ArchiveStoreConfig) -> ArchiveStore:
    if config.s3_bucket:
        return S3ArchiveStore(
            config.s3_bucket, prefix=config.s3_prefix, endpoint_url=config.s3_endpoint, region=config.s3_region
        )
    return LocalArchiveStore(config.directory)
