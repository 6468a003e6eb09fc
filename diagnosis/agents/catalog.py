"""The versioned prompt files and the catalog version persisted on every run (prompt audit).

The current catalog is `prompts/*.md`. Older or candidate catalogs live beside it, each in its own
folder `prompts/catalogs/<name>/*.md`, so a new version is added without deleting the old one. A
run (a replay) pins one with `use_catalog(name or catalog-<hash>)`; everything below then reads the
pinned catalog for that thread or task only.
"""

from __future__ import annotations

import contextvars
import hashlib
import re
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from diagnosis.model_text import normalise_model_text

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
CATALOGS_DIR = PROMPTS_DIR / "catalogs"
CURRENT = "current"
_active_dir: contextvars.ContextVar[Path | None] = contextvars.ContextVar("prompt_catalog_dir", default=None)
HEADER_RE = re.compile(r"^<!-- prompt: (?P<role>[a-z_]+) (?P<version>v\d+) -->$")


class PromptError(Exception):
    pass


@dataclass(frozen=True)
class Prompt:
    role: str
    version: str
    text: str

    @property
    def label(self) -> str:
        return f"{self.role}:{self.version}"


def _dir() -> Path:
    return _active_dir.get() or PROMPTS_DIR


def load_catalog() -> dict[str, Prompt]:
    return _load_dir(_dir())


@lru_cache(maxsize=16)
def _load_dir(folder: Path) -> dict[str, Prompt]:
    prompts = {}
    for path in sorted(folder.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        header = text.splitlines()[0] if text else ""
        match = HEADER_RE.match(header)
        if not match or match["role"] != path.stem:
            raise PromptError(f"{path.name} must start with '<!-- prompt: {path.stem} vN -->'")
        prompts[path.stem] = Prompt(match["role"], match["version"], text)
    return prompts


def prompt(role: str) -> Prompt:
    return load_catalog()[role]


def catalog_version() -> str:
    """`catalog-<hash>`: changes whenever any prompt file changes, so a run names its exact prompts."""
    return _version_of(_dir())


@lru_cache(maxsize=16)
def _version_of(folder: Path) -> str:
    digest = hashlib.sha256()
    for role, item in sorted(_load_dir(folder).items()):
        digest.update(f"{role}\0{item.text}\0".encode())
    return f"catalog-{digest.hexdigest()[:10]}"


def available_catalogs() -> dict[str, str]:
    """Every catalog that can be pinned: name -> `catalog-<hash>` (the current one is named "current")."""
    found = {CURRENT: _version_of(PROMPTS_DIR)}
    if CATALOGS_DIR.is_dir():
        for folder in sorted(p for p in CATALOGS_DIR.iterdir() if p.is_dir() and any(p.glob("*.md"))):
            found[folder.name] = _version_of(folder)
    return found


def resolve_catalog(pin: str | None) -> Path:
    """The folder of the catalog named `pin` (a folder name, "current", or a `catalog-<hash>`)."""
    if not pin or pin == CURRENT or pin == _version_of(PROMPTS_DIR):
        return PROMPTS_DIR
    if CATALOGS_DIR.is_dir():
        for folder in sorted(p for p in CATALOGS_DIR.iterdir() if p.is_dir()):
            if pin == folder.name or pin == _version_of(folder):
                return folder
    known = ", ".join(f"{name} ({version})" for name, version in available_catalogs().items())
    raise PromptError(f"unknown prompt catalog {pin!r}; available: {known}")


@contextmanager
def use_catalog(pin: str | None):
    """Read prompts from the pinned catalog inside the block (per thread / task: a context variable)."""
    token = _active_dir.set(resolve_catalog(pin))
    try:
        yield catalog_version()
    finally:
        _active_dir.reset(token)


PROMPT_ECHO_MIN_CHARS = 40  # shorter prompt lines ("Rules:") are too generic to prove a leak


def _prompt_lines() -> tuple[str, ...]:
    return _prompt_lines_of(_dir())


@lru_cache(maxsize=16)
def _prompt_lines_of(folder: Path) -> tuple[str, ...]:
    lines = {" ".join(normalise_model_text(line).split()) for p in _load_dir(folder).values() for line in p.text.splitlines()}
    return tuple(sorted(line for line in lines if len(line) >= PROMPT_ECHO_MIN_CHARS))


def prompt_echoed(text: str) -> bool:
    """True when `text` repeats a prompt header or a line of any system prompt.

    Both sides go through `normalise_model_text` first (NFKC, no zero-width or other format
    characters, hyphen look-alikes folded), then whitespace is collapsed.
    """
    flat = " ".join(normalise_model_text(text or "").split())
    return "<!-- prompt:" in flat or any(line in flat for line in _prompt_lines())


def prompt_audit() -> dict:
    return {"catalog_version": catalog_version(), "prompts": {r: p.version for r, p in sorted(load_catalog().items())}}
