"""`feedmesh up` as a process under test: started, its standard error read line by line, and
handed over once it says where its web UI is."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from tests.eventually import eventually

READY = "feedmesh up: web UI at"


@dataclass
class UpRun:
    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    web: str = ""
    """The first web process's base URL, as `up` printed it."""

    def text(self) -> str:
        return "".join(self.lines)


@asynccontextmanager
async def running_up(*argv: str, timeout: float = 180.0) -> AsyncIterator[UpRun]:
    """`feedmesh up ARGV`; yields once it printed its web UI's address (fails with its output if
    it ended first); terminated on the way out if it still runs, its output read to the end."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "feedmesh", "up", *argv, stderr=asyncio.subprocess.PIPE)
    run = UpRun(process)

    async def read() -> None:
        assert process.stderr is not None
        while line := await process.stderr.readline():
            run.lines.append(line.decode())

    reader = asyncio.create_task(read())
    try:
        await eventually(lambda: any(x.startswith(READY) for x in run.lines)
                         or process.returncode is not None, timeout=timeout)
        ready = next((x for x in run.lines if x.startswith(READY)), None)
        assert ready is not None, run.text()
        run.web = ready.split()[5].rstrip("/;")
        yield run
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()
        await reader
