"""Templates (Jinja2, autoescaped, strict about undefined names) and the page response.

Every page is sent with headers that keep it to itself: a Content-Security-Policy that
allows only this origin's stylesheet and script (no inline script, no framing), no
caching (pages show what a token may read), no MIME sniffing, no referrer to elsewhere.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from registry.web.deps import WebUser

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}

NAV = (
    ("/", "Overview"),
    ("/capabilities", "Capabilities"),
    ("/adapters", "Adapters"),
    ("/channels", "Channels"),
    ("/gates", "Gates"),
    ("/nodes", "Nodes"),
    ("/audit", "Audit"),
)


def short(digest: str | None, length: int = 12) -> str:
    """The first characters of a digest (pages always offer the full one beside it)."""
    return "" if digest is None else digest[:length]


def when(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat()


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def compact_json(value: Any, limit: int = 72) -> str:
    """One line of JSON, cut at ``limit`` characters (the full value is shown beside it)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def score(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.4g}"


def size(value: int) -> str:
    """Bytes for people: ``812 B``, ``14.2 KiB``, ``3.0 MiB``."""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{int(amount)} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"  # pragma: no cover - the loop returns at GiB


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(("html", "svg")),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        short=short,
        when=when,
        iso=iso,
        pretty_json=pretty_json,
        compact_json=compact_json,
        score=score,
        signed=signed,
        size=size,
    )
    env.globals["nav"] = NAV
    return env


ENV = _environment()


def render(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)


def page(
    request: Request,
    template: str,
    *,
    user: WebUser | None = None,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """A rendered page with the security headers; ``user`` is the signed-in WebUser."""
    body = render(
        template,
        user=user,
        path=request.url.path,
        csrf=(user.csrf or "") if user is not None else "",
        **context,
    )
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)
