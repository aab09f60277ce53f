"""Benchmarks (approver) and evaluations (evaluator, publisher or approver; any role reads)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from registry.api.deps import Approver, Evaluator, Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.routes import PREFIX
from registry.api.schemas import (
    MAX_DB_INT,
    BenchmarkCreate,
    BenchmarkPublic,
    EvaluationCreate,
    EvaluationDetail,
    EvaluationPublic,
)
from registry.domain import Benchmark, Evaluation
from registry.services import evaluations

router = APIRouter(prefix=PREFIX, tags=["benchmarks"])
EvaluationId = Annotated[int, Path(ge=1, le=MAX_DB_INT)]


@router.post(
    "/benchmarks",
    response_model=BenchmarkPublic,
    status_code=201,
    responses=errors(404, 401, 403, 409, 413, 422),
)
def post_benchmark(body: BenchmarkCreate, state: StateDep, actor: Approver) -> Benchmark:
    with state.db.write() as session:
        return evaluations.create_benchmark(
            session=session, actor=actor, benchmark=Benchmark(**body.model_dump())
        )


@router.get("/benchmarks", response_model=list[BenchmarkPublic], responses=errors(*READ))
def get_benchmarks(state: StateDep, _reader: Reader) -> list[Benchmark]:
    with state.db.read() as session:
        return evaluations.list_benchmarks(session=session)


@router.post(
    "/evaluations",
    response_model=EvaluationPublic,
    status_code=201,
    responses=errors(404, 401, 403, 409, 413, 422),
)
def post_evaluation(body: EvaluationCreate, state: StateDep, actor: Evaluator) -> Evaluation:
    fields = body.model_dump(exclude={"provenance"})
    provenance = body.provenance.model_dump(exclude_none=True) if body.provenance else {}
    draft = evaluations.EvaluationDraft(**fields, provenance=provenance)
    with state.db.write() as session:
        return evaluations.create_evaluation(session=session, actor=actor, draft=draft)


@router.get("/evaluations", response_model=list[EvaluationPublic], responses=errors(*READ))
def get_evaluations(
    state: StateDep, _reader: Reader, benchmark: str | None = None
) -> list[Evaluation]:
    with state.db.read() as session:
        return evaluations.list_evaluations(session=session, benchmark=benchmark)


@router.get(
    "/evaluations/{evaluation_id}",
    response_model=EvaluationDetail,
    responses=errors(*READ, 404),
)
def get_evaluation(evaluation_id: EvaluationId, state: StateDep, _reader: Reader) -> Evaluation:
    with state.db.read() as session:
        return evaluations.get_evaluation(session=session, evaluation_id=evaluation_id)
