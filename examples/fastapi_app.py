"""A FastAPI application that admits typed tasks from its routes and awaits their results.

    ECHOMQ_URL=redis://127.0.0.1:6379 uvicorn fastapi_app:api     # the web process
    ECHOMQ_URL=redis://127.0.0.1:6379 echomq worker fastapi_app:app  # the worker process

``POST /thumbnails`` admits a job and answers its id at once; ``GET /thumbnails/{id}``
waits (up to ``wait`` seconds) for its result. Tested by tests/echomq/tasks/test_examples.py.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import msgspec
from fastapi import FastAPI, HTTPException

import echomq

app = echomq.App(url=os.environ.get("ECHOMQ_URL", "redis://127.0.0.1:6379"), queue="thumbnails")


class Thumbnail(msgspec.Struct):
    image: str
    width: int
    height: int


@app.task(max_attempts=3, timeout_ms=30_000)
async def thumbnail(image: str, width: int = 128) -> Thumbnail:
    return Thumbnail(image=image, width=width, height=width * 3 // 4)


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    yield
    await app.aclose()


api = FastAPI(lifespan=lifespan)


@api.post("/thumbnails")
async def make_thumbnail(image: str, width: int = 128) -> dict[str, str]:
    try:
        handle = await thumbnail.admit(image, width)
    except echomq.InvalidArgument as exc:  # checked before anything was written
        raise HTTPException(422, str(exc)) from None
    return {"id": handle.id, "verdict": handle.verdict.value}


@api.get("/thumbnails/{job_id}")
async def get_thumbnail(job_id: str, wait: float = 10.0) -> dict[str, object]:
    try:
        done = await thumbnail.handle(job_id).result(timeout=wait)
    except (echomq.ResultTimeout, echomq.InvalidArgument, echomq.JobNotFound):
        raise HTTPException(404, "no such job done") from None
    except echomq.JobFailed as exc:
        raise HTTPException(500, f"{exc.remote_type}: {exc.remote_message}") from None
    return msgspec.to_builtins(done)  # type: ignore[no-any-return]
