"""HTTP client of the registry REST API (`/v1`, docs/CONTRACTS.md section 2).

Runtime nodes, trainers and the `weact` CLI talk to the registry only through
`RegistryClient`. It imports nothing of the server (only `registry.errors`), so a node
installs it without FastAPI or SQLAlchemy. Answers come back as plain dicts typed with the
`TypedDict`s of `records`; every failure as a typed `registry.errors.RegistryError`:

    records.py    the answers' types (tied to registry/api/schemas.py by a test)
    transport.py  the one httpx client; error answers and transport failures -> typed errors
    endpoints.py  `Endpoints`: one method per JSON endpoint
    client.py     `RegistryClient(Endpoints)`: plus verified blob and adapter transfers
    transfers.py  digests, atomic writes, staged PEFT directories
"""

from registry.client.client import RegistryClient
from registry.client.records import (
    Adapter,
    AdapterPage,
    Backbone,
    Benchmark,
    Capability,
    Evaluation,
    EvaluationDetail,
    Event,
    EventsVerification,
    GateCheck,
    GateReport,
    Health,
    LibraryEntry,
    Lineage,
    Node,
    PromoteResult,
    Revision,
    State,
    TokenCreated,
    TokenInfo,
)
from registry.client.transfers import (
    ADAPTER_FILES,
    CHUNK_SIZE,
    ProgressCallback,
    sha256_of_file,
)
from registry.client.transport import raise_for_error, translate

__all__ = [
    "ADAPTER_FILES",
    "CHUNK_SIZE",
    "Adapter",
    "AdapterPage",
    "Backbone",
    "Benchmark",
    "Capability",
    "Evaluation",
    "EvaluationDetail",
    "Event",
    "EventsVerification",
    "GateCheck",
    "GateReport",
    "Health",
    "LibraryEntry",
    "Lineage",
    "Node",
    "ProgressCallback",
    "PromoteResult",
    "RegistryClient",
    "Revision",
    "State",
    "TokenCreated",
    "TokenInfo",
    "raise_for_error",
    "sha256_of_file",
    "translate",
]
