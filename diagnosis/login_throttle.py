"""Console login throttling (django-axes): failed logins are counted per user name and per client
address; past AXES_FAILURE_LIMIT either one is locked out for AXES_COOLOFF_MINUTES, and even the right
password is refused meanwhile.

Only logins that come with a request are web logins to throttle. `authenticate()` without one (the
test client's `login()`, management commands, the shell) is left to the next backend, instead of
axes' refusal of it."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend


class LoginThrottleBackend(AxesStandaloneBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
