"""POST /api/runs/{runId}/replay: run a recorded diagnosis again on the evidence it saw."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.api.errors import ApiError, error_response, submission_error_response
from diagnosis.api.run_output import RunOutput
from diagnosis.api.throttling import ChatThrottle
from diagnosis.contracts import RUN_ID_PATTERN
from diagnosis.ids import is_valid_run_id
from diagnosis.models import DiagnosisRun
from diagnosis.services.submission import BrokerUnavailable, RunRefused
from diagnosis.services.replay import (ROLES, ReplayForbidden, ReplayNotFound, replay_options_clean,
                                       replay_submit, replay_wait)


class ReplayOutput(serializers.Serializer):
    run = RunOutput(help_text="The new run (poll links.run or stream links.events until it is terminal).")
    replayOf = serializers.CharField(help_text="The run this one replays.")


class ReplayView(APIView):
    throttle_classes = [ChatThrottle]

    class ReplayInputSerializer(serializers.Serializer):
        model = serializers.CharField(required=False, max_length=128,
                                      help_text='One model for every role; "offline" is the built-in analyser. '
                                                "Default: the configured model.")
        models = serializers.DictField(child=serializers.CharField(max_length=128), required=False,
                                       help_text=f"Per-role model names ({', '.join(ROLES)}), over `model`.")
        promptVersion = serializers.CharField(required=False, max_length=64,
                                              help_text='A prompt catalog: "current", a catalog name or catalog-<hash>.')
        liveFallback = serializers.BooleanField(required=False, default=False,
                                                help_text="Serve tool calls missing from the recording live "
                                                          "(marked live_fallback in the trace). Default: never.")
        wait = serializers.BooleanField(required=False, default=False)

    @extend_schema(request=ReplayInputSerializer, responses={200: ReplayOutput, 202: ReplayOutput},  # 200 only when waited for and finished
                   description="Replay a finished chat diagnosis on its recorded tool results (support staff and "
                               "the run's owner). The new run is linked by replayOf; its tool invocations are "
                               "copies of the recorded ones; a call the original never made is an ERROR "
                               "invocation with not_in_recording.")
    def post(self, request, run_id: str):
        if not is_valid_run_id(run_id):
            raise ApiError(code="invalid_input", message=f"runId must match {RUN_ID_PATTERN}", field="runId")
        data = self.ReplayInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            options = replay_options_clean(model=values.get("model"), models=values.get("models"),
                                           prompt_version=values.get("promptVersion"),
                                           live_fallback=values["liveFallback"])
            run = replay_submit(user=request.user, run_id=run_id, options=options)
        except ReplayNotFound:
            return error_response(code="not_found", message="run not found", status_code=404, field="runId")
        except ReplayForbidden:
            return error_response(code="permission_denied", message="only the run's owner and support staff may "
                                  "replay it", status_code=403, field="runId")
        except (RunRefused, BrokerUnavailable) as exc:  # bad input, not replayable, too many active runs
            return submission_error_response(exc)
        run = DiagnosisRun.objects.select_related("session", "replay_of").get(pk=run.pk)
        if values["wait"]:
            run = replay_wait(run, settings.CHAT_WAIT_SECONDS)
        body = ReplayOutput({"run": run, "replayOf": run.replay_of.run_id}, context={"request": request}).data
        return Response(body, status=200 if values["wait"] and run.is_terminal else 202)
