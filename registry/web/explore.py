"""Pages that look across versions, and the files of one version.

/adapters/compare?left=ID&right=ID     two versions side by side: configuration, the tensors
                                       whose bytes differ, evaluations (with the delta)
/adapters/{id}/files/{name}            one of a version's files, downloaded (its blob,
                                       verified as it is read), for a signed-in reader

Its router is installed before ``registry.web.pages`` so that ``/adapters/compare`` is not
read as a version id.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response, StreamingResponse

from registry.api.deps import StateDep
from registry.api.schemas import MAX_DB_INT
from registry.errors import NotFoundError
from registry.services import adapters, blobs, page_compare
from registry.web.deps import Viewer
from registry.web.render import SECURITY_HEADERS, page
from registry.web.routing import PageRoute

router = APIRouter(route_class=PageRoute, include_in_schema=False)

Id = Annotated[int, Query(ge=1, le=MAX_DB_INT)]


@router.get("/adapters/compare")
def compare(request: Request, state: StateDep, user: Viewer, left: Id, right: Id) -> Response:
    with state.db.read() as session:
        data = page_compare.compare_adapters(
            session=session, store=state.store, left_id=left, right_id=right
        )
    return page(request, "compare.html", user=user, data=data)


@router.get("/adapters/{adapter_id}/files/{name}")
def download(
    adapter_id: Annotated[int, Path(ge=1, le=MAX_DB_INT)],
    name: str,
    state: StateDep,
    user: Viewer,
) -> Response:
    with state.db.read() as session:
        adapter = adapters.get_adapter(session=session, adapter_id=adapter_id)
    digest = adapter.files.get(name)
    if digest is None:
        raise NotFoundError(f"{adapter.name} has no file {name!r}")
    size = blobs.blob_size(store=state.store, digest=digest)
    saved_as = f"{adapter.capability}-{adapter.version}-{name}"  # checked names: no quoting
    headers = {
        **SECURITY_HEADERS,
        "Content-Length": str(size),
        "Content-Disposition": f'attachment; filename="{saved_as}"',
        "ETag": f'"{digest}"',
    }
    stream = blobs.iter_blob(store=state.store, digest=digest)
    return StreamingResponse(stream, headers=headers, media_type="application/octet-stream")
