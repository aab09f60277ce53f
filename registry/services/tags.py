"""Tags of adapter versions (`key=value`, one value per key) and the search over versions.

A version's tags are set when it is pushed and changed later (`set_tags`: keys to set,
keys to remove; one audited event) by its publisher's principal (with a publisher token),
an approver or an admin; anyone else is 403. The search (`search_filters`) narrows
`list_adapters` by tags (all must match), label and parent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from registry.audit import append_event
from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterTag, SqlAdapterVersion
from registry.domain import AdapterVersion, Principal, Role
from registry.errors import ForbiddenError, InvalidError
from registry.services.ownership import published_by

KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$")
MAX_VALUE = 256
MAX_TAGS = 64


def check_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """Valid tags, sorted by key; `InvalidError` naming every bad one."""
    bad_keys = [k for k in tags if not isinstance(k, str) or not KEY.match(k)]
    problems = [f"tag key {k!r}: letters, digits and _.:/- (1-64)" for k in bad_keys]
    problems += [
        f"tag {k}: value of 1-{MAX_VALUE} characters"
        for k, v in tags.items()
        if not isinstance(v, str) or not 0 < len(v) <= MAX_VALUE or "\x00" in v
    ]
    if len(tags) > MAX_TAGS:
        problems.append(f"at most {MAX_TAGS} tags")
    if problems:
        raise InvalidError({"message": "invalid tags", "problems": problems})
    return dict(sorted(tags.items()))


def parse_tag(text: str) -> tuple[str, str]:
    """`key=value` -> (key, value); `InvalidError` otherwise."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InvalidError(f"tag {text!r}: expected KEY=VALUE")
    check_tags({key: value})
    return key, value


def set_tags(
    *,
    session: Session,
    actor: Principal,
    row: SqlAdapterVersion,
    put: Mapping[str, str],
    remove: Sequence[str] = (),
) -> AdapterVersion:
    """Set `put` and remove `remove` (keys) on a version's tags; one `adapter.tag` event."""
    check_may_tag(actor, row)
    put = check_tags(put)
    both = sorted(set(put) & set(remove))
    if both:
        raise InvalidError(f"tags both set and removed: {', '.join(both)}")
    current = {tag.key: tag for tag in row.tags}
    unknown = sorted(set(remove) - set(current))
    if unknown:
        raise InvalidError(f"{row.capability.name}@{row.version} has no tag {', '.join(unknown)}")
    if len(set(current) - set(remove) | set(put)) > MAX_TAGS:
        raise InvalidError(f"at most {MAX_TAGS} tags")
    for key in remove:
        row.tags.remove(current[key])
    for key, value in put.items():
        if key in current:
            current[key].value = value
        else:
            row.tags.append(SqlAdapterTag(key=key, value=value))
    session.flush()
    session.refresh(row)
    adapter = to_adapter(row)
    append_event(
        session,
        actor=actor.name,
        action="adapter.tag",
        subject=f"adapter:{row.id}",
        payload={"set": dict(put), "remove": sorted(remove), "tags": adapter.tags},
    )
    return adapter


def check_may_tag(actor: Principal, row: SqlAdapterVersion) -> None:
    """Approvers and admins tag any version; a publisher only its own principal's."""
    if actor.role in (Role.APPROVER, Role.ADMIN):
        return
    if actor.role is Role.PUBLISHER and published_by(row, actor):
        return
    raise ForbiddenError(
        f"{row.capability.name}@{row.version} was published by {row.created_by!r}: only that "
        "principal, approvers and admins change its tags"
    )


def search_filters(
    query: Select[Any],
    *,
    tags: Sequence[str] = (),
    label: str | None = None,
    parent_id: int | None = None,
) -> Select[Any]:
    """`query` over adapter versions narrowed by every given criterion (all must hold):
    each `key=value` tag, the exact label and the parent's id (text in the model card:
    `registry/services/card_search.py`)."""
    for tag in tags:
        key, value = parse_tag(tag)
        tagged = select(SqlAdapterTag.adapter_id).where(
            SqlAdapterTag.key == key, SqlAdapterTag.value == value
        )
        query = query.where(SqlAdapterVersion.id.in_(tagged.scalar_subquery()))
    if label is not None:
        query = query.where(SqlAdapterVersion.label == label)
    if parent_id is not None:
        query = query.where(SqlAdapterVersion.parent_id == parent_id)
    return query
