from django.urls import path

from diagnosis.api import health

urlpatterns = [
    path("health", health.HealthView.as_view(), name="health"),
]
