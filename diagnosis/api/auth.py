"""`Authorization: Bearer <token>`: the API token under the scheme most tools send (Alertmanager's
`http_config.authorization`, Prometheus-style clients). Same tokens as `Authorization: Token <token>`."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import TokenAuthentication


class BearerTokenAuthentication(TokenAuthentication):
    keyword = "Bearer"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of BearerTokenAuthentication (registered on import)."""

    target_class = "diagnosis.api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "The API token, as `Bearer <token>`."}
