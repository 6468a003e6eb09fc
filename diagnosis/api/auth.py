"""`Authorization: Bearer <token>`: the API token under the scheme most tools send (Alertmanager's
`http_config.authorization`, Prometheus-style clients). Same tokens as `Authorization: Token <token>`."""

from rest_framework.authentication import TokenAuthentication


class BearerTokenAuthentication(TokenAuthentication):
    keyword = "Bearer"
