"""Random pronounceable names for generated incidents: services, namespaces, nodes, tables, hosts.

Every name is drawn from syllables, never from a list of real-looking service names, so a method
tested on generated incidents cannot lean on a name telling it what a component does.
"""

from __future__ import annotations

import random

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gl", "kr", "pl",
           "st", "tr", "th", "sk", "ch", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ei")
_CODAS = ("", "", "", "n", "r", "l", "s", "x", "m")
# Role-free endings: they sound like product names and say nothing about what the component does.
_ENDINGS = ("ix", "on", "ara", "ello", "ium", "ent", "o", "a", "ic", "or", "us", "en")


def word(rng: random.Random, syllables: int) -> str:
    """A pronounceable word of ``syllables`` consonant-vowel syllables."""
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)]
    return "".join(parts) + rng.choice(_CODAS)


class NameBook:
    """Draws names that are unique within one incident (and DNS labels: lower-case, digits, '-')."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._taken: set[str] = set()

    def _unique(self, make) -> str:
        while True:
            name = make()
            if name not in self._taken and len(name) <= 40:
                self._taken.add(name)
                return name

    def service(self) -> str:
        """``velmora``, ``krastix-dou``, ``plenara-ix``: a root word, sometimes a second word or an ending."""
        rng = self._rng

        def make() -> str:
            root = word(rng, rng.randint(2, 3))
            style = rng.random()
            if style < 0.35:
                return f"{root}-{word(rng, rng.randint(1, 2))}"
            if style < 0.6:
                return f"{root}-{rng.choice(_ENDINGS)}"
            if style < 0.7:
                return f"{root}{rng.randint(2, 9)}"
            return root
        return self._unique(make)

    def plain(self, syllables: tuple[int, int] = (2, 3)) -> str:
        """A single unique word (a namespace, a table, a queue, a node pool)."""
        return self._unique(lambda: word(self._rng, self._rng.randint(*syllables)))

    def host(self) -> str:
        """An outside API host: ``api.drouvel.io``."""
        rng = self._rng
        return self._unique(lambda: f"{rng.choice(('api', 'gw', 'rest', 'v2'))}.{word(rng, 2)}."
                                    f"{rng.choice(('io', 'com', 'net', 'cloud', 'dev'))}")


def hex_id(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(length))


def pod_suffix(rng: random.Random) -> str:
    """The 5-character suffix Kubernetes gives a pod of a ReplicaSet (no vowels, as the real alphabet)."""
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


def template_hash(rng: random.Random) -> str:
    """A ReplicaSet's ``pod-template-hash`` (9-10 characters of the same alphabet)."""
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(rng.choice((9, 10))))
