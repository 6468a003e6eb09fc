"""factory_boy factories for the audit model."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from diagnosis import models
from diagnosis.ids import new_invocation_id


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")


class ChatSessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.ChatSession

    session_id = factory.Sequence(lambda n: f"sess-{n}")
    owner = factory.SubFactory(UserFactory)


class DiagnosisRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.DiagnosisRun

    session = factory.SubFactory(ChatSessionFactory)
    question = "Why is payment-service failing?"


class AgentStepFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.AgentStep

    run = factory.SubFactory(DiagnosisRunFactory)
    session_id = factory.LazyAttribute(lambda s: s.run.session.session_id)
    step_index = factory.Sequence(lambda n: n)
    node = "planner"
    agent = "planner"


class ToolInvocationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.ToolInvocation

    run = factory.SubFactory(DiagnosisRunFactory)
    session_id = factory.LazyAttribute(lambda s: s.run.session.session_id)
    invocation_id = factory.LazyFunction(new_invocation_id)
    tool_name = "query_logs"
    status = models.ToolInvocation.Status.SUCCESS
    result = factory.LazyFunction(lambda: {"records": []})
