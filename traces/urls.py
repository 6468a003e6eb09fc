from django.urls import path

from traces import api, diff_api

urlpatterns = [
    path("diagnosis/<str:session_id>/trace", api.TraceApi.as_view(), name="diagnosis-trace"),
    path("diagnosis/<str:session_id>/runs", api.RunListApi.as_view(), name="diagnosis-run-list"),
    path("feedback", api.FeedbackApi.as_view(), name="feedback"),
    path("cases/<str:run_id>/publish", api.CasePublishApi.as_view(), name="case-publish"),
    path("runs/<str:run_a>/diff/<str:run_b>", diff_api.RunDiffApi.as_view(), name="run-diff"),
]
