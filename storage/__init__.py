"""Content-addressed blob stores and safetensors manifests (no torch, no numpy).

See docs/CONTRACTS.md section 1 for the API that other packages use; `storage.lora` owns the
PEFT LoRA adapter format (config, tensors, fit against a backbone).
"""

from storage.base import (
    BACKENDS,
    BaseBlobStore,
    BlobSource,
    BlobStore,
    check_store,
    open_store,
)
from storage.digest import CHUNK_SIZE, is_sha256, sha256_file
from storage.errors import (
    AdapterFormatError,
    BlobNotFoundError,
    DigestMismatchError,
    HeaderLimitError,
    InvalidDigestError,
    InvalidSafetensorsError,
    ManifestError,
    StorageError,
    StoreUnavailableError,
    UnknownStoreError,
)
from storage.header import DTYPE_SIZES, Header, HeaderLimits, TensorInfo, read_header
from storage.local import LocalBlobStore
from storage.manifest import (
    Manifest,
    TensorEntry,
    manifest_of_file,
    manifest_of_files,
    manifest_of_path,
    manifest_of_stream,
    manifest_of_tensors,
    safetensors_files,
)

__all__ = [
    "BACKENDS",
    "CHUNK_SIZE",
    "DTYPE_SIZES",
    "AdapterFormatError",
    "BaseBlobStore",
    "BlobNotFoundError",
    "BlobSource",
    "BlobStore",
    "DigestMismatchError",
    "Header",
    "HeaderLimitError",
    "HeaderLimits",
    "InvalidDigestError",
    "InvalidSafetensorsError",
    "LocalBlobStore",
    "Manifest",
    "ManifestError",
    "StorageError",
    "StoreUnavailableError",
    "TensorEntry",
    "TensorInfo",
    "UnknownStoreError",
    "is_sha256",
    "manifest_of_file",
    "manifest_of_files",
    "manifest_of_path",
    "manifest_of_stream",
    "manifest_of_tensors",
    "check_store",
    "open_store",
    "read_header",
    "safetensors_files",
    "sha256_file",
]


def __getattr__(name: str) -> object:
    # S3BlobStore imports boto3; load it only when asked for.
    if name == "S3BlobStore":
        from storage.s3 import S3BlobStore

        return S3BlobStore
    raise AttributeError(f"module 'storage' has no attribute {name!r}")
