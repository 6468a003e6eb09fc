"""The engine's texts in the reader's language: one gettext catalogue, read with the standard library.

Every text the engine writes for a reader (answer headings, verifier rationales, report wording, …) is
English source text used as the gettext msgid; its Chinese stands in
``diagnosis/locale/zh_Hans/LC_MESSAGES/diagnosis.po`` (compiled to the ``.mo`` beside it). The language is
the answer's ("en" or "zh", chosen per request from the question), never a process-wide locale, so every
call names it. Placeholders are ``str.format`` fields (``python-brace-format`` in the catalogue).

Call sites pass the msgid as a string literal, ``i18n.text("**Root cause**", language)``, or mark a literal
kept for later with ``i18n.mark("…")``: tests/architecture/test_text_catalogue.py reads those calls and checks
that each has its Chinese translation with the same placeholders.
"""

from __future__ import annotations

import gettext
from functools import lru_cache
from pathlib import Path
from typing import Any

DOMAIN = "diagnosis"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
# The answer language -> the catalogue's locale directory ("en" is the msgids themselves).
CATALOGUE_LOCALES = {"zh": "zh_Hans"}


class MissingTranslation(LookupError):
    """A msgid the catalogue does not translate: a text was added in code but not to the .po."""


class _Missing(gettext.NullTranslations):
    """The last fallback of a catalogue: a msgid it does not hold is an error, never English in a Chinese answer."""

    def gettext(self, message: str) -> str:
        raise MissingTranslation(message)

    def pgettext(self, context: str, message: str) -> str:
        raise MissingTranslation(f"{context}\x04{message}")


def answer_language(language: Any) -> str:
    """ "zh" for a Chinese answer, "en" for anything else."""
    return "zh" if language == "zh" else "en"


def catalogue(language: str) -> gettext.NullTranslations:
    """The translations of one answer language (the English msgids need none)."""
    return _load(answer_language(language))


@lru_cache(maxsize=None)
def _load(language: str) -> gettext.NullTranslations:
    locale = CATALOGUE_LOCALES.get(language)
    if locale is None:
        return gettext.NullTranslations()
    translations = gettext.translation(DOMAIN, str(LOCALE_DIR), languages=[locale], fallback=False)
    translations.add_fallback(_Missing())
    return translations


def text(message: str, language: str, *, context: str | None = None, **params: Any) -> str:
    """``message`` (its English source text) in ``language``, its ``{placeholders}`` filled from ``params``.

    ``context`` is the gettext msgctxt, for one English word that reads two ways in Chinese."""
    translations = catalogue(language)
    translated = translations.pgettext(context, message) if context else translations.gettext(message)
    return translated.format(**params) if params else translated


def mark(message: str, *, context: str | None = None) -> str:
    """A msgid kept in a constant and translated later with ``text``: returned unchanged, but the
    catalogue check reads it like a ``text`` call."""
    return message
