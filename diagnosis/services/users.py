"""API clients and support users."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from rest_framework.authtoken.models import Token

from diagnosis.roles import SUPPORT_STAFF


@transaction.atomic
def api_client_create(*, username: str, rotate: bool = False) -> tuple:
    """A non-staff API client and its token (kept unless `rotate`)."""
    user, _ = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": False})
    if user.is_staff or user.is_superuser:
        raise ValueError(f"{username} is a staff account; API clients must not be staff")
    if rotate:
        Token.objects.filter(user=user).delete()
    token, _ = Token.objects.get_or_create(user=user)
    return user, token.key


@transaction.atomic
def support_user_create(*, username: str, password: str | None = None, group: str = SUPPORT_STAFF) -> tuple:
    """A staff user in the support-staff (or auditor) group, able to log into the audit console."""
    password = password or secrets.token_urlsafe(12)
    user, _ = get_user_model().objects.get_or_create(username=username)
    user.is_staff = True
    user.set_password(password)
    user.save()
    user.groups.add(Group.objects.get(name=group))
    return user, password
