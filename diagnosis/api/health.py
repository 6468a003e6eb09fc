"""GET /api/health: 200 when every dependency answers, 503 naming the failing part otherwise."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from diagnosis.services.health import health_check

_Check = inline_serializer("HealthCheck", {"ok": serializers.BooleanField(), "error": serializers.CharField(required=False)})
_Health = inline_serializer(
    "Health",
    {"status": serializers.ChoiceField(["ok", "unavailable"]), "checks": serializers.DictField(child=_Check),
     "lastReapAt": serializers.DateTimeField(allow_null=True)},
)


class HealthView(APIView):
    # Load balancers probe it without credentials; it reveals dependency names, never data.
    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(responses={200: _Health, 503: _Health}, auth=[])
    def get(self, request):
        report = health_check()
        return Response(report, status=200 if report["status"] == "ok" else 503)
