from django.urls import path

from diagnosis.api import aiops, chat, health, replay

urlpatterns = [
    path("health", health.HealthView.as_view(), name="health"),
    path("chat", chat.chat_view, name="chat"),
    path("ai_ops", aiops.AiOpsView.as_view(), name="ai-ops"),
    path("runs/<str:run_id>", chat.RunView.as_view(), name="run-detail"),
    path("runs/<str:run_id>/events", chat.run_events_view, name="run-events"),
    path("runs/<str:run_id>/replay", replay.ReplayView.as_view(), name="run-replay"),
]
