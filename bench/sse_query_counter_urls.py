"""URLs of `sse_query_counter`: the service's, plus GET /bench/queries (SQL statements sent so far)."""

from django.http import JsonResponse
from django.urls import path

from config.urls import urlpatterns as service_urlpatterns


def queries(request):
    from sse_query_counter import QUERIES

    return JsonResponse({"queries": QUERIES["n"]})


urlpatterns = [path("bench/queries", queries), *service_urlpatterns]
