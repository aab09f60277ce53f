"""One router per resource, each at `PREFIX`: their routes are served as they are made, so that
an app lists them without re-deriving them (`registry.api.app.API_ROUTES`)."""

PREFIX = "/v1"
