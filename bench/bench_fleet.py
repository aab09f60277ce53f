"""Fleet benchmark: how fast a promotion reaches every node, with one or two registry processes.

Part 1 (nodes). `weact serve` processes on one fresh PostgreSQL database (one, then two);
1 and 8 runtime nodes in this process (PeftEngine on the tiny model, ChannelFollower with its
own node client), long-polling the last registry process while promotions go through the
first. Timed: from the promote call returning to every node serving the new revision for new
episodes (its library swapped, `follower.revision` moved). Promotions alternate between two
already pulled versions of `write` ("warm": no transfer), then publish a fresh version each
time ("cold": download, verify, load included). Median and max over the rounds.

Part 2 (followers). `--followers` (default 200; repeat it for more sizes) plain HTTP
long-poll clients on loopback (asyncio streams and h11, one connection each, in this
process), split over the registry processes, held for `--hold` seconds while a promotion runs
every `--every` seconds; one follower alone first, as the baseline. Reported: errors (must
be 0) and promote-to-wake latency p50/p99, from the promote call returning to each follower
having parsed the new revision out of its answer (negative when the answer beat the
promote's own response), the promote call's own median, and the registry processes'
resident memory before and after each hold. The followers share this machine's cores with
the registries: their own client work is in the figure.

    .venv/bin/python bench/bench_fleet.py [--rounds 10] [--cold 3] [--followers 200 ...]
                                          [--hold 60] [--every 3]

Needs PostgreSQL (`--pg-url`; a scratch database is created and dropped). Target: a
promotion reaches every node in under 1 s plus transfer time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import h11

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synthetic import (  # noqa: E402
    Seeded,
    backbone_manifest_json,
    scratch_database,
    write_adapter,
    write_backbone,
)

from registry.client import RegistryClient  # noqa: E402
from registry.db.migrate import upgrade  # noqa: E402
from registry.launcher import registry_processes  # noqa: E402
from runtime.follow import ChannelFollower  # noqa: E402
from runtime.tiny import build_tiny_adapter, build_tiny_backbone  # noqa: E402
from storage.manifest import manifest_of_path  # noqa: E402

ORDER = ["plan", "write"]
os.environ.setdefault("TQDM_DISABLE", "1")  # no weight-loading bars between the tables
warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="warm promotions per setup")
    parser.add_argument("--cold", type=int, default=3, help="promotions of fresh versions")
    parser.add_argument(
        "--followers", type=int, action="append", help="followers held at once (repeat: 200, 1000)"
    )
    parser.add_argument("--hold", type=float, default=60.0, help="seconds followers are held")
    parser.add_argument("--every", type=float, default=3.0, help="seconds between promotions")
    parser.add_argument("--only", choices=["nodes", "followers"], default=None)
    parser.add_argument(
        "--pg-url",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
        help="a database of the PostgreSQL server the scratch databases are created on",
    )
    args = parser.parse_args()
    args.followers = args.followers or [200]
    return args


@contextmanager
def migrated_database(pg_url: str) -> Iterator[str]:
    """A scratch database at head before any registry process starts (replicas must not race
    to migrate)."""
    with scratch_database(pg_url) as url:
        upgrade(url)
        yield url


def _wait(check: Callable[[], bool], timeout: float = 60.0) -> float:
    """Seconds until `check()` holds (polled every millisecond)."""
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("the fleet did not converge")
        time.sleep(0.001)
    return time.perf_counter() - start


@contextmanager
def nodes(
    count: int, world: Seeded, url: str, backbone: Path, tmp: Path
) -> Iterator[list[ChannelFollower]]:
    from runtime.engines.peft import PeftEngine

    with ExitStack() as stack:
        followers = []
        for i in range(count):
            token = world.admin.create_token(name=f"bench-node-{i}", role="node")["token"]
            client = stack.enter_context(RegistryClient(url, token))
            follower = ChannelFollower(
                client, PeftEngine(backbone), "prod", f"bench-{count}-{i}", tmp / f"lib-{i}",
                wait_s=30, heartbeat_s=10,
            )  # fmt: skip
            follower.start()
            stack.callback(follower.stop)
            followers.append(follower)
        yield followers


def _all_serve(followers: list[ChannelFollower], revision: int) -> bool:
    return all(f.revision == revision for f in followers)


def time_promotions(
    world: Seeded, followers: list[ChannelFollower], versions: Iterator[int]
) -> list[float]:
    times = []
    for version in versions:
        revision = world.promote("prod", {"write": version})
        times.append(_wait(functools.partial(_all_serve, followers, revision)))
    return times


def _alternate(world: Seeded, versions: list[int], rounds: int) -> Iterator[int]:
    """`rounds` versions of `write`, each different from the one the channel serves."""
    current = world.admin.get_channel("prod")["library"]["write"]["adapter_id"]
    others = itertools.cycle(versions)
    for _ in range(rounds):
        current = next(v for v in others if v != current)
        yield current


def part_nodes(args: argparse.Namespace, tmp: Path) -> list[tuple[str, list[float]]]:
    backbone = build_tiny_backbone(tmp / "backbone")
    adapters = [build_tiny_adapter(backbone, tmp / f"a{i}", seed=i + 1) for i in range(3)]
    rows = []
    for processes in (1, 2):
        with (
            migrated_database(args.pg_url) as database,
            registry_processes(tmp / f"r{processes}", processes, database, str(tmp / "blobs"))
            as servers,
        ):  # fmt: skip
            world = Seeded.create(servers[0], manifest_of_path(backbone).to_json(), ORDER)
            plan = world.publish(adapters[0], "plan")["id"]
            warm = [world.publish(adapters[i], "write")["id"] for i in (1, 2)]
            world.promote("prod", {"plan": plan, "write": warm[0]})
            for count in (1, 8):
                with nodes(count, world, servers[-1].url, backbone, tmp / f"n{processes}") as f:
                    time_promotions(world, f, _alternate(world, warm, 2))  # both pulled
                    label = f"{processes} registry process(es), {count} node(s)"
                    rounds = _alternate(world, warm, args.rounds)
                    rows.append((f"{label}, warm", time_promotions(world, f, rounds)))
                    fresh = (
                        world.publish(
                            build_tiny_adapter(backbone, tmp / f"c{processes}{count}{i}", 100 + i),
                            "write",
                        )["id"]
                        for i in range(args.cold)
                    )
                    rows.append((f"{label}, cold", time_promotions(world, f, fresh)))
            world.close()
    return rows


class _Connection:
    """One follower's keep-alive HTTP/1.1 connection: asyncio streams and h11, no pool.

    httpx's `AsyncClient` holds its connections in one pool, whose bookkeeping walks every
    connection, and for each idle one every connection again, on each request and response
    (httpcore 1.0): with 1,000 connections the bench's own process spent most of a wake
    storm there, not in the registry. A follower is one socket and one parser here.
    """

    def __init__(self, url: str, token: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = [("Host", parts.netloc), ("Authorization", f"Bearer {token}")]
        self.h11: h11.Connection | None = None
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, target: str) -> tuple[int, bytes]:
        """Status and body of `GET target`, on this connection (reopened when it closed)."""
        conn, reader, writer = self.h11, self.reader, self.writer
        if conn is not None and conn.states == {h11.CLIENT: h11.DONE, h11.SERVER: h11.DONE}:
            conn.start_next_cycle()
        if conn is None or reader is None or writer is None or conn.our_state is not h11.IDLE:
            await self.close()
            reader, writer = await asyncio.open_connection(self.host, self.port)
            conn = h11.Connection(h11.CLIENT)
            self.h11, self.reader, self.writer = conn, reader, writer
        request = h11.Request(method="GET", target=target, headers=self.headers)
        writer.write(conn.send(request) + (conn.send(h11.EndOfMessage()) or b""))
        status, body = 0, bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(65536))  # b"": the server closed
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return status, bytes(body)
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the server closed the connection")

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        self.h11 = self.reader = self.writer = None


async def _follower(connection: _Connection, start: int, until: float, out: dict[str, Any]) -> None:
    """One follower, long-polling on its own connection. Its wake is timed once it has
    parsed the new revision out of the answer."""
    after = start
    try:
        while time.perf_counter() < until:
            wait = max(0.1, min(20.0, until - time.perf_counter()))
            try:
                async with asyncio.timeout(60):
                    status, body = await connection.get(
                        f"/v1/channels/prod?after={after}&wait={wait:.3f}"
                    )
            except (OSError, TimeoutError, h11.ProtocolError) as exc:
                out["errors"].append(repr(exc))
                await connection.close()
                await asyncio.sleep(0.5)
                continue
            if status == 304:
                continue
            if status != 200:
                out["errors"].append(f"HTTP {status}")
                continue
            revision = int(json.loads(body)["revision"])
            woken = time.perf_counter()
            out["seen"].extend((r, woken) for r in range(after + 1, revision + 1))
            after = revision
    finally:
        await connection.close()


async def _promoter(
    world: Seeded,
    versions: list[int],
    every: float,
    until: float,
    promoted: dict[int, float],
    calls: list[float],
) -> None:
    """A promotion every `every` s: when each returned (by revision), how long each took."""
    for version in _alternate(world, versions, 10**6):
        await asyncio.sleep(every)
        if time.perf_counter() + 1 > until:
            return
        called = time.perf_counter()
        revision = await asyncio.to_thread(world.promote, "prod", {"write": version})
        promoted[revision] = time.perf_counter()
        calls.append(promoted[revision] - called)


async def _hold(
    world: Seeded, urls: list[str], versions: list[int], followers: int, hold: float, every: float
) -> dict[str, Any]:
    token = world.tokens["reader"]
    start = world.head("prod")
    until = time.perf_counter() + hold
    promoted: dict[int, float] = {}
    out: dict[str, Any] = {"errors": [], "seen": [], "promote_s": []}
    connections = [_Connection(urls[i % len(urls)], token) for i in range(followers)]
    tasks = [_follower(connection, start, until, out) for connection in connections]
    await asyncio.gather(
        _promoter(world, versions, every, until, promoted, out["promote_s"]), *tasks
    )
    out["latencies"] = [woken - promoted[r] for r, woken in out["seen"] if r in promoted]
    out["promotions"] = len(promoted)
    return out


def part_followers(args: argparse.Namespace, tmp: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for processes in (1, 2):
        with (
            migrated_database(args.pg_url) as database,
            registry_processes(tmp / f"h{processes}", processes, database, str(tmp / "hb"))
            as servers,
        ):  # fmt: skip
            bb = backbone_manifest_json(write_backbone(tmp / f"hb{processes}"))
            world = Seeded.create(servers[0], bb, ["write"])
            versions = [
                world.publish(write_adapter(tmp / f"w{processes}{i}", seed=i), "write")["id"]
                for i in range(2)
            ]
            world.promote("prod", {"write": versions[0]})
            urls = [s.url for s in servers]
            pids = [s.process.pid for s in servers]
            label = f"{processes} registry process(es)"
            holds = [(1, min(15.0, args.hold))] + [(n, args.hold) for n in args.followers]
            for followers, hold in holds:
                before = _rss_mib(pids)
                result = asyncio.run(_hold(world, urls, versions, followers, hold, args.every))
                result["rss"] = (before, _rss_mib(pids))
                rows.append((f"{label}, {followers} follower(s)", result))
            world.close()
    return rows


def _rss_mib(pids: list[int]) -> float:
    """The registry processes' resident memory, summed (MiB; Linux /proc)."""
    total = 0
    for pid in pids:
        status = Path(f"/proc/{pid}/status").read_text()
        total += next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")
        )
    return total / 1024


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:8.1f} {max(values) * 1e3:8.1f}"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    args = _args()
    print("command:", " ".join(sys.argv), f"| load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "followers":
            _print_nodes(part_nodes(args, Path(tmp)))
        if args.only != "nodes":
            _print_followers(args, part_followers(args, Path(tmp)))
    print(f"load average at the end: {os.getloadavg()}")


def _print_nodes(rows: list[tuple[str, list[float]]]) -> None:
    print("\npromote returned -> every node serves the new revision (ms)")
    print(f"{'setup':48} {'median':>8} {'max':>8}  {'max vs 1 s':>10}")
    for label, times in rows:
        print(f"{label:48} {_ms(times)}  {max(times) / 1.0:10.2f}")


def _print_followers(args: argparse.Namespace, rows: list[tuple[str, dict[str, Any]]]) -> None:
    counts = ", ".join(str(n) for n in args.followers)
    print(
        f"\nlong-poll followers (1 as the baseline, held {min(15.0, args.hold):.0f} s; "
        f"{counts} held "
        f"{args.hold:.0f} s), a promotion every {args.every:.0f} s: promote returned -> "
        "follower parsed the revision (ms); the promote call's own median (ms); the registry "
        "processes' RSS before and after the hold (MiB)"
    )
    print(
        f"{'setup':42} {'promotions':>10} {'promote':>8} {'wakes':>7} {'errors':>6} {'p50':>8}"
        f" {'p99':>8} {'RSS':>13}"
    )
    for label, r in rows:
        lat = r["latencies"] or [float("nan")]
        calls = r["promote_s"] or [float("nan")]
        print(
            f"{label:42} {r['promotions']:>10} {statistics.median(calls) * 1e3:8.1f} "
            f"{len(r['latencies']):>7} {len(r['errors']):>6} {_percentile(lat, 0.5) * 1e3:8.1f} "
            f"{_percentile(lat, 0.99) * 1e3:8.1f} {r['rss'][0]:6.0f}->{r['rss'][1]:<6.0f}"
        )
        for error in r["errors"][:5]:
            print("  error:", error)


if __name__ == "__main__":
    main()
