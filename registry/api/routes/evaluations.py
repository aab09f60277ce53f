"""Benchmarks (approver) and evaluations (publisher or approver)."""

from __future__ import annotations

from fastapi import APIRouter

from registry.api.deps import Approver, Evaluator, Reader, StateDep
from registry.api.responses import READ, errors
from registry.api.schemas import (
    BenchmarkCreate,
    BenchmarkPublic,
    EvaluationCreate,
    EvaluationPublic,
)
from registry.domain import Benchmark, Evaluation
from registry.services import evaluations

router = APIRouter(tags=["benchmarks"])


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
    draft = evaluations.EvaluationDraft(**body.model_dump())
    with state.db.write() as session:
        return evaluations.create_evaluation(session=session, actor=actor, draft=draft)


@router.get("/evaluations", response_model=list[EvaluationPublic], responses=errors(*READ))
def get_evaluations(
    state: StateDep, _reader: Reader, benchmark: str | None = None
) -> list[Evaluation]:
    with state.db.read() as session:
        return evaluations.list_evaluations(session=session, benchmark=benchmark)
