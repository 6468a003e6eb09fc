"""Formatting filters of the audit console templates."""

from __future__ import annotations

from django import template

from traces.rendering import json_html

register = template.Library()


@register.filter
def ms(value) -> str:
    """Milliseconds for a reader: 840 ms, 2.4 s, 3 min 05 s; an em dash when unknown."""
    if value is None or value == "":
        return "—"
    value = float(value)
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    minutes, seconds = divmod(int(round(value / 1000)), 60)
    return f"{minutes} min {seconds:02d} s"


def _formatted(value, number: type, spec: str, otherwise: str) -> str:
    try:
        return format(number(value), spec)
    except (TypeError, ValueError):
        return otherwise


@register.filter
def thousands(value) -> str:
    return _formatted(value, int, ",", "—")


@register.filter
def css_number(value) -> str:
    """A number for a style attribute, always with a dot whatever the active locale."""
    return _formatted(value, float, ".2f", "0")


@register.filter
def pretty_json(value):
    return json_html(value)


@register.filter
def get_item(mapping, key):
    """mapping[key] in a template (labels of stored codes); the key itself when unknown."""
    try:
        return mapping.get(key, key)
    except AttributeError:
        return key
