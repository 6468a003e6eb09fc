"""A real Alertmanager (Debian's prometheus-alertmanager), fed by the test Prometheus's always-firing
rule, posts its webhook to /api/ai_ops on the production server with a bearer token; the alert
analysis run it creates finishes on the worker (services pass)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from diagnosis.models import DiagnosisRun
from tests.diagnosis.conftest import demo_knowledge  # noqa: F401
from tests.support.server import free_port, managed_process

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ALERTMANAGER_BIN = os.environ.get("ALERTMANAGER_BIN", "/usr/bin/prometheus-alertmanager")

# The receiver configuration documented in docs/DEPLOY.md.
ALERTMANAGER_CONFIG = """\
route:
  receiver: aiops
  group_by: [alertname, service]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: aiops
    webhook_configs:
      - url: "{base_url}/api/ai_ops?stream=false"
        send_resolved: false
        http_config:
          authorization:
            type: Bearer
            credentials: "{token}"
"""


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_an_alertmanager_webhook_with_a_bearer_token_starts_an_alert_analysis_that_finishes(
        production_stack, alice, demo_knowledge, tmp_path):  # noqa: F811
    from rest_framework.authtoken.models import Token

    from tests.backends.conftest import _start_prometheus, _stop

    if not os.access(ALERTMANAGER_BIN, os.X_OK):
        pytest.fail(f"{ALERTMANAGER_BIN} is missing: apt-get install prometheus-alertmanager", pytrace=False)
    token = Token.objects.get_or_create(user=alice)[0].key
    port = free_port()
    am_url = f"http://127.0.0.1:{port}"
    (tmp_path / "alertmanager.yml").write_text(ALERTMANAGER_CONFIG.format(base_url=production_stack.base_url, token=token))
    args = [ALERTMANAGER_BIN, f"--config.file={tmp_path / 'alertmanager.yml'}", f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"]
    with managed_process(args, env=dict(os.environ), log_path=tmp_path / "alertmanager.log", what="alertmanager",
                         ready=lambda _log: _ready(am_url)):
        alerting = f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"127.0.0.1:{port}\"]\n"
        (tmp_path / "prometheus").mkdir()
        # Resend every second: the first notification may precede Alertmanager's discovery.
        prometheus, _url, _log = _start_prometheus(tmp_path / "prometheus", extra=alerting,
                                                   args=("--rules.alert.resend-delay=1s",))
        try:
            deadline = time.monotonic() + 90
            run = None
            while time.monotonic() < deadline:
                run = DiagnosisRun.objects.filter(session__owner=alice, agent_flow=DiagnosisRun.Flow.AI_OPS).first()
                if run is not None and run.is_terminal:
                    break
                time.sleep(0.5)
        finally:
            _stop(prometheus)
    log = Path(tmp_path / "alertmanager.log").read_text()
    assert run is not None, f"no AI_OPS run was created from the webhook; alertmanager log:\n{log[-2000:]}"
    assert run.is_terminal, f"the run did not finish: {run.status}"
    assert run.status == DiagnosisRun.Status.SUCCESS, (run.error_code, run.error_message)
    submitted = run.input
    assert submitted["source"] == "alertmanager"
    assert [a["alertname"] for a in submitted["alerts"]] == ["AlwaysFiring"]
    assert "AlwaysFiring" in run.answer
