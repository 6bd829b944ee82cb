"""On-disk embedding cache: every unique text is encoded once, across runs and invocations.

Keys hash the token ids of each formatted text. Layout:
``<root>/<space>/<shard>.keys.npy`` (sha1 keys, bytes) and ``<shard>.npy`` (float32
vectors), where ``space`` hashes the model identity, pooling, max length and format (chat,
raw or pair: features of two formats never mix). A shard's keys
file is written last, so a shard without one (a crash mid-write) is ignored.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import numpy as np

from rmlens._io import write_atomic
from rmlens.backbones._gguf import default_cache_dir as cache_root


def default_cache_dir() -> Path:
    """``embeddings/`` under the rmlens cache root (``$RMLENS_CACHE``, else
    ``~/.cache/rmlens``), beside the converted models' ``models/``."""
    return cache_root() / "embeddings"


def ids_key(ids: list[int]) -> bytes:
    """Key of one tokenized text: the ids fix the text, template and truncation exactly."""
    return hashlib.sha1(np.asarray(ids, dtype=np.int64).tobytes()).hexdigest().encode()


class EmbeddingCache:
    """Vectors keyed by token-id hash, in one folder per (model identity, pooling, max length,
    format, precision)."""

    def __init__(self, root: str | Path | None, *, identity: str, pooling: str, max_length: int,
                 format: str = "chat", precision: str = "fp32"):  # fmt: skip
        key = f"{identity}|{pooling}|{max_length}|{format}"
        if precision != "fp32":  # fp32's folders keep the key they had before precisions
            key += f"|{precision}"
        space = hashlib.sha1(key.encode()).hexdigest()[:16]
        self.dir = Path(root or default_cache_dir()) / space
        self._index: dict[bytes, tuple[int, int]] | None = None
        self._shards: list[np.ndarray] = []

    def _load(self) -> dict[bytes, tuple[int, int]]:
        if self._index is None:
            self._index = {}
            for keys_file in sorted(self.dir.glob("*.keys.npy")):
                vectors_file = keys_file.with_name(keys_file.name.replace(".keys.npy", ".npy"))
                if not vectors_file.exists():
                    continue
                keys = np.load(keys_file, allow_pickle=False)
                vectors = np.load(vectors_file, mmap_mode="r", allow_pickle=False)
                if len(keys) != len(vectors):
                    continue
                shard = len(self._shards)
                self._shards.append(vectors)
                for row, key in enumerate(keys.tolist()):
                    self._index[key] = (shard, row)
        return self._index

    def __contains__(self, key: bytes) -> bool:
        return key in self._load()

    def get(self, keys: list[bytes]) -> np.ndarray:
        index = self._load()
        return np.stack([self._shards[s][r] for s, r in (index[k] for k in keys)]).astype(
            np.float32
        )

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Write one shard (vectors, then keys); it is read back from disk, not kept."""
        if not keys:
            return
        index = self._load()
        name = uuid.uuid4().hex
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        path = write_atomic(self.dir / f"{name}.npy", lambda tmp: _save(tmp, vectors))
        write_atomic(self.dir / f"{name}.keys.npy", lambda tmp: _save(tmp, np.array(keys)))
        shard = len(self._shards)
        self._shards.append(np.load(path, mmap_mode="r", allow_pickle=False))
        for row, key in enumerate(keys):
            index[key] = (shard, row)


def _save(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.save(f, array, allow_pickle=False)
