"""Sealed tokens: opened by every replica that shares the key, by nothing else, never for another purpose."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from gateway.errors import CliError
from gateway.sealing import KEY_ENV, Sealer, SealError, deployment_sealer, file_key
from gateway.settings import ServeSettings

pytestmark = pytest.mark.anyio


async def test_replicas_sharing_the_key_open_each_others_tokens(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    one = await deployment_sealer(ServeSettings(state_root=tmp_path / "a"), {KEY_ENV: key})
    two = await deployment_sealer(ServeSettings(state_root=tmp_path / "b"), {KEY_ENV: key})
    token = one.seal("task", {"c": "everything", "t": "abc", "p": "alice"})
    assert two.open("task", token) == {"c": "everything", "t": "abc", "p": "alice"}
    assert "alice" not in token and "abc" not in token  # sealed, not just signed
    other = Sealer(Fernet.generate_key())
    with pytest.raises(SealError, match="not issued by this gateway"):
        other.open("task", token)
    with pytest.raises(SealError):
        two.open("requestState", token)  # sealed for one purpose, never opened as another


async def test_a_rotated_key_still_opens_tokens_of_the_old_one(tmp_path: Path) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    token = (await deployment_sealer(ServeSettings(state_root=tmp_path), {KEY_ENV: old})).seal("task", {"t": "1"})
    rotated = await deployment_sealer(ServeSettings(state_root=tmp_path), {KEY_ENV: f"{new},{old}"})
    assert rotated.open("task", token) == {"t": "1"}


async def test_a_bad_key_is_refused_with_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(CliError, match=f"{KEY_ENV}: a sealing key must be 32 bytes in URL-safe base64"):
        await deployment_sealer(ServeSettings(state_root=tmp_path), {KEY_ENV: "hunter2"})


async def test_without_a_key_one_is_made_once_under_the_state_root_0600(tmp_path: Path) -> None:
    first = await deployment_sealer(ServeSettings(state_root=tmp_path), {})
    token = first.seal("task", {"t": "x"})
    again = await deployment_sealer(ServeSettings(state_root=tmp_path), {})  # a restart: the same key
    assert again.open("task", token) == {"t": "x"}
    path = tmp_path / "sealing.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert file_key(tmp_path) == path.read_text().strip()
    assert os.listdir(tmp_path) == ["sealing.key"]  # no temporary file left behind
    assert "key" not in repr(first).replace("keys hidden", "")


async def test_replicas_on_one_redis_share_the_key_the_first_one_made(tmp_path: Path) -> None:
    from .replicas import redis_server

    with redis_server(tmp_path / "redis") as redis:
        one = await deployment_sealer(ServeSettings(state_root=tmp_path / "a", state_url=SecretStr(redis.url)), {})
        two = await deployment_sealer(ServeSettings(state_root=tmp_path / "b", state_url=SecretStr(redis.url)), {})
    assert two.open("task", one.seal("task", {"t": "shared"})) == {"t": "shared"}
    assert not (tmp_path / "a" / "sealing.key").exists()  # the key lives in the shared store only
