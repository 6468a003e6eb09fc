"""The per-user budget of run submissions, shared by every endpoint that starts a run (chat, alert
analysis, replay)."""

from __future__ import annotations

import logging

from rest_framework.throttling import UserRateThrottle

from diagnosis.api.errors import ApiError

logger = logging.getLogger(__name__)


class ChatThrottle(UserRateThrottle):
    """CHAT_THROTTLE_RATE per user, counted atomically: a fixed-window counter incremented in the cache
    (Redis INCR on a key that expires with its window; the local-memory cache increments under its lock),
    so simultaneous requests can never read the same count and all pass. At most N per window."""

    scope = "chat"

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        ident = request.user.pk if request.user and request.user.is_authenticated else self.get_ident(request)
        now = self.timer()
        window = int(now // self.duration)
        key = f"throttle:{self.scope}:{ident}:{window}"
        # The counters live in the Redis cache; when Redis is down the request is refused before anything
        # is created, with a 503 naming it, instead of escaping as a 500.
        try:
            self.cache.add(key, 0, timeout=self.duration + 1)  # SET NX: the window's counter starts at 0
            try:
                count = self.cache.incr(key)
            except ValueError:  # the key expired between the two calls: this request opens a new count
                self.cache.add(key, 0, timeout=self.duration + 1)
                count = self.cache.incr(key)
        except Exception as exc:
            logger.error("chat throttle: the cache is unavailable: %s", exc)
            raise ApiError(code="cache_unavailable", status_code=503,
                           message="The cache (Redis) is unavailable, so the request was not accepted and no run was "
                                   "created. Retry shortly.") from None
        self._wait = (window + 1) * self.duration - now
        return count <= self.num_requests

    def wait(self):
        return max(1.0, getattr(self, "_wait", self.duration))
