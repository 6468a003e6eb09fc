"""The settings of the traces and changes backends: defaults, good values, and bad ones naming the variable."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import env

SETTINGS = str(Path(__file__).resolve().parents[2] / "config" / "settings.py")
OURS = ("TRACES_BACKEND", "TEMPO_URL", "TEMPO_TENANT", "JAEGER_URL", "JAEGER_API", "CHANGES_BACKEND", "CHANGES_SOURCES",
        "HELM_DRIVER", "ARGOCD_URL", "ARGOCD_TOKEN", "ARGOCD_APP_NAMESPACE")


def load(monkeypatch, **values) -> dict:
    for name in list(os.environ):
        if name in OURS or name.startswith(("DATABASE_", "REDIS_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DJANGO_DEBUG", "true")
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(SETTINGS)


def test_the_defaults_serve_the_demo_world(monkeypatch):
    s = load(monkeypatch)
    assert (s["TRACES_BACKEND"], s["CHANGES_BACKEND"], s["HELM_DRIVER"]) == ("demo", "demo", "secret")
    assert s["CHANGES_SOURCES"] == ["rollout", "config", "secret", "helm"]


def test_tempo_jaeger_and_the_change_sources_are_read(monkeypatch):
    s = load(monkeypatch, TRACES_BACKEND="tempo", TEMPO_URL="http://tempo:3200/", TEMPO_TENANT="shop",
             CHANGES_BACKEND="kubernetes", HELM_DRIVER="configmaps", ARGOCD_URL="https://argocd.example.com",
             ARGOCD_TOKEN="t0ken", ARGOCD_APP_NAMESPACE="argocd")
    assert (s["TEMPO_URL"], s["TEMPO_TENANT"], s["HELM_DRIVER"]) == ("http://tempo:3200", "shop", "configmap")
    assert s["CHANGES_SOURCES"] == ["rollout", "config", "secret", "helm", "argocd"]  # argocd once it has a URL
    s = load(monkeypatch, TRACES_BACKEND="jaeger", JAEGER_URL="http://jaeger-query:16686", CHANGES_SOURCES="rollout,helm")
    assert s["JAEGER_URL"] == "http://jaeger-query:16686" and s["CHANGES_SOURCES"] == ["rollout", "helm"]
    assert s["JAEGER_API"] == "internal" and load(monkeypatch, JAEGER_API="v3")["JAEGER_API"] == "v3"


@pytest.mark.parametrize("values, fragment", [
    ({"TRACES_BACKEND": "zipkin"}, "TRACES_BACKEND='zipkin' is not supported; use one of: demo, tempo, jaeger"),
    ({"TRACES_BACKEND": "tempo"}, "TEMPO_URL is required when TRACES_BACKEND=tempo"),
    ({"TRACES_BACKEND": "jaeger"}, "JAEGER_URL is required when TRACES_BACKEND=jaeger"),
    ({"TEMPO_URL": "tempo:3200"}, "TEMPO_URL='tempo:3200' is not a valid URL"),
    ({"CHANGES_BACKEND": "git"}, "CHANGES_BACKEND='git' is not supported"),
    ({"CHANGES_SOURCES": "rollout,deploys"}, "CHANGES_SOURCES has 'deploys', which is not supported"),
    ({"CHANGES_SOURCES": "rollout,,helm"}, "CHANGES_SOURCES='rollout,,helm' has an empty entry"),
    ({"CHANGES_SOURCES": "helm,helm"}, "names an entry twice"),
    ({"HELM_DRIVER": "sql"}, "HELM_DRIVER='sql' is not supported"),
    ({"JAEGER_API": "v2"}, "JAEGER_API='v2' is not supported; use one of: internal, v3"),
    ({"CHANGES_BACKEND": "kubernetes", "CHANGES_SOURCES": "argocd"}, "ARGOCD_URL and ARGOCD_TOKEN are required"),
])
def test_a_bad_value_stops_start_up_naming_the_variable(monkeypatch, values, fragment):
    with pytest.raises(ImproperlyConfigured) as info:
        load(monkeypatch, **values)
    assert fragment in str(info.value)


def test_env_subset_accepts_only_listed_entries():
    assert env.env_subset("X", ["a"], ("a", "b"), environ={"X": "b, a"}) == ["b", "a"]
    with pytest.raises(ImproperlyConfigured, match="X has 'c', which is not supported; use any of: a, b"):
        env.env_subset("X", ["a"], ("a", "b"), environ={"X": "a,c"})
