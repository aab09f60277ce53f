"""The forms that change state, for the roles the API allows them (approver, admin).

    POST /adapters/{id}/approve | reject | revoke     reason
    POST /channels/{name}/promote                     adapter.<capability>, order, reason,
                                                      expected_revision
    POST /channels/{name}/rollback                    to_revision, expected_revision, reason
    POST /adapters/{id}/tags                          set (KEY=VALUE), remove.<key>: any
                                                      signed-in role; the service allows its
                                                      publisher, approvers and admins

Each form is checked like the API's JSON body (the same request schemas), then handed to
the same service function as the API route; the answer is a redirect to the page that
shows the result (303, post/redirect/get), or the error's page with the API's status.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, ValidationError
from starlette.responses import RedirectResponse, Response

from registry.api.deps import StateDep
from registry.api.schemas import MAX_DB_INT, Decision, PromoteRequest, RollbackRequest
from registry.auth import Permission
from registry.errors import InvalidError
from registry.names import check_name
from registry.services import adapters, channels, lifecycle, tags
from registry.web.deps import Approving, Form, WebUser, acting
from registry.web.routing import PageRoute

router = APIRouter(route_class=PageRoute, include_in_schema=False)

AdapterId = Annotated[int, Path(ge=1, le=MAX_DB_INT)]
Verb = Literal["approve", "reject", "revoke"]
Schema = TypeVar("Schema", bound=BaseModel)
ADAPTER_FIELD = "adapter."
REMOVE = "none"
REMOVE_TAG = "remove."
Tagging = Annotated[WebUser, Depends(acting(Permission.READ))]

DECISIONS = {
    "approve": lifecycle.approve_adapter,
    "reject": lifecycle.reject_adapter,
    "revoke": lifecycle.revoke_adapter,
}


def _parse(schema: type[Schema], data: dict[str, Any]) -> Schema:
    """The form as the API's request schema; its complaints as ``InvalidError``."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        detail = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
        raise InvalidError(detail) from exc


def _number(value: str | None) -> int | str | None:
    """A number field: blank is None; anything else goes to the schema as typed."""
    if not value:
        return None
    return int(value) if value.isascii() and value.isdigit() else value


def _text(value: str | None) -> str | None:
    """A text field: blank (or absent) is None."""
    if value is None or not value.strip():
        return None
    return value.strip()


def _see(url: str) -> Response:
    return RedirectResponse(url, status_code=303)


@router.post("/adapters/{adapter_id}/tags")
def tag(  # before /adapters/{id}/{verb}: "tags" is not a decision
    adapter_id: AdapterId, state: StateDep, user: Tagging, form: Form
) -> Response:
    put = dict([tags.parse_tag(form["set"].strip())]) if _text(form.get("set")) else {}
    remove = sorted(k.removeprefix(REMOVE_TAG) for k in form if k.startswith(REMOVE_TAG))
    if not put and not remove:
        raise InvalidError("give a tag to set (KEY=VALUE) or tick tags to remove")
    with state.db.write() as session:
        row = adapters.find_adapter_row(session, adapter_id)
        tags.set_tags(session=session, actor=user.principal, row=row, put=put, remove=remove)
    return _see(f"/adapters/{adapter_id}?done=tag#card")


@router.post("/adapters/{adapter_id}/{verb}")
def decide(
    adapter_id: AdapterId, verb: Verb, state: StateDep, user: Approving, form: Form
) -> Response:
    body = _parse(Decision, {"reason": _text(form.get("reason"))})
    with state.db.write() as session:
        DECISIONS[verb](
            session=session, actor=user.principal, adapter_id=adapter_id, reason=body.reason
        )
    if verb == "revoke":
        state.notifier.notify()
    return _see(f"/adapters/{adapter_id}?done={verb}")


def _promotion(form: dict[str, str]) -> dict[str, Any]:
    """The API's PromoteRequest body from the promote form (blank fields keep what is)."""
    picked: dict[str, Any] = {}
    for field, value in form.items():
        if field.startswith(ADAPTER_FIELD) and value:
            picked[field.removeprefix(ADAPTER_FIELD)] = None if value == REMOVE else _number(value)
    order = _text(form.get("order"))
    return {
        "adapters": picked,
        "order": [c.strip() for c in order.split(",") if c.strip()] if order else None,
        "expected_revision": _number(form.get("expected_revision")),
        "reason": _text(form.get("reason")),
    }


@router.post("/channels/{name}/promote")
def promote(name: str, state: StateDep, user: Approving, form: Form) -> Response:
    check_name("channel", name)
    body = _parse(PromoteRequest, _promotion(form))
    draft = channels.PromoteRequest(channel=name, **body.model_dump())
    with state.db.write() as session:
        channels.promote(session=session, actor=user.principal, request=draft)
    state.notifier.notify()
    return _see(f"/channels/{name}?done=promote")


@router.post("/channels/{name}/rollback")
def rollback(name: str, state: StateDep, user: Approving, form: Form) -> Response:
    check_name("channel", name)
    fields = {
        "to_revision": _number(form.get("to_revision")),
        "expected_revision": _number(form.get("expected_revision")),
        "reason": _text(form.get("reason")),
    }
    body = _parse(RollbackRequest, fields)
    with state.db.write() as session:
        channels.rollback(
            session=session,
            actor=user.principal,
            channel=name,
            to_revision=body.to_revision,
            expected_revision=body.expected_revision,
            reason=body.reason,
        )
    state.notifier.notify()
    return _see(f"/channels/{name}?done=rollback")
