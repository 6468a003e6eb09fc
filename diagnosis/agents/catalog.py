"""The versioned prompt files and the catalog version persisted on every run (prompt audit)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from diagnosis.model_text import normalise_model_text

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
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


@lru_cache(maxsize=1)
def load_catalog() -> dict[str, Prompt]:
    prompts = {}
    for path in sorted(PROMPTS_DIR.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        header = text.splitlines()[0] if text else ""
        match = HEADER_RE.match(header)
        if not match or match["role"] != path.stem:
            raise PromptError(f"{path.name} must start with '<!-- prompt: {path.stem} vN -->'")
        prompts[path.stem] = Prompt(match["role"], match["version"], text)
    return prompts


def prompt(role: str) -> Prompt:
    return load_catalog()[role]


@lru_cache(maxsize=1)
def catalog_version() -> str:
    """`catalog-<hash>`: changes whenever any prompt file changes, so a run names its exact prompts."""
    digest = hashlib.sha256()
    for role, item in sorted(load_catalog().items()):
        digest.update(f"{role}\0{item.text}\0".encode())
    return f"catalog-{digest.hexdigest()[:10]}"


PROMPT_ECHO_MIN_CHARS = 40  # shorter prompt lines ("Rules:") are too generic to prove a leak


@lru_cache(maxsize=1)
def _prompt_lines() -> tuple[str, ...]:
    lines = {" ".join(normalise_model_text(line).split()) for p in load_catalog().values() for line in p.text.splitlines()}
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
