"""The canary: one tiny generation through each entry of a server (Triton's `ensemble` and
`tensorrt_llm_bls`, the OpenAI front), each with a deadline.  An entry that gives no answer
in time is failing; the supervisor (serving/supervisor.py) restarts a server whose entry keeps
failing, and the chart's probes run the same check (`python -m serving canary`).

Why a request and not Triton's health endpoints: a wedged model still reports ready.  Measured
on Triton 2.51: a `tensorrt_llm_bls` stub deadlocked inside the Python backend, or a stub
stopped by SIGSTOP, leaves /v2/health/ready and the model's ready state at 200 while every
request through it waits for ever.

What counts as an answer: the generation, a refusal of the request as such (INVALID_ARG), or
"retry later" (UNAVAILABLE: overloaded).  A failure is not (INTERNAL, a transport error, or
"Stub process ... is not healthy", which Triton 2.51 answers once a stub misses its health
checks, e.g. stopped by SIGSTOP), nor is silence.  An overloaded server answers "retry later"
or queues; a queued canary is not a wedge, so the
canary asks for the highest priority where the engine has priorities (the CPU engine admits it
before the waiting requests) and, where the engine refuses the priority input (TensorRT-LLM's
backend: contract/features.py), gets a deadline longer than the engine's first-token timeout,
after which the server itself answers UNAVAILABLE.

Nothing here starts or stops a server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from client import AsyncLlmClient, SamplingParams
from client.errors import ClientError, InvalidRequestError, RequestTimeout, ServerUnavailable
from contract import request_ids

PROMPT = "ping"
TOP_PRIORITY = 1.0


@dataclass(frozen=True)
class CanarySettings:
    deadline_s: float = 15.0  # entries whose engine takes the canary's priority
    # Entries whose engine refuses a priority (TensorRT-LLM's backend): above its first-token
    # timeout (the relays' default 60 s), after which an overloaded server answers UNAVAILABLE.
    unprioritized_deadline_s: float = 75.0
    period_s: float = 10.0  # between two canaries of the supervisor
    failures_to_wedge: int = 3  # failures in a row that make an entry wedged

    def validate(self) -> None:
        for name in ("deadline_s", "unprioritized_deadline_s", "period_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"canary '{name}' must be > 0, got {getattr(self, name)}")
        if self.failures_to_wedge < 1:
            raise ValueError(f"canary 'failures_to_wedge' must be >= 1, got {self.failures_to_wedge}")


@dataclass(frozen=True)
class CanaryResult:
    entry: str  # a Triton model name, or "openai"
    answered: bool
    seconds: float
    detail: str


@dataclass
class EntryCanary:
    """One Triton entry model's canary, remembering whether its engine takes a priority."""

    grpc_url: str
    model: str
    prioritized: bool = True

    async def probe(self, settings: CanarySettings) -> CanaryResult:
        """One canary request under its own request id (contract/request_ids.py), which a failure's
        detail names, so the launcher's line and the server's and models' lines can be matched."""
        request_id = request_ids.new_request_id("canary")
        with request_ids.bind(request_id):
            result = await self._probe(settings)
        return (
            result
            if result.answered
            else dataclasses.replace(result, detail=f"{result.detail} (request_id={request_id})")
        )

    async def _probe(self, settings: CanarySettings) -> CanaryResult:
        t0 = time.monotonic()
        deadline = settings.deadline_s if self.prioritized else settings.unprioritized_deadline_s
        sampling = SamplingParams(max_tokens=1, temperature=0.0, priority=TOP_PRIORITY if self.prioritized else None)
        client = AsyncLlmClient(self.grpc_url, model=self.model)
        try:
            await client.generate(PROMPT, sampling, timeout_s=deadline)
            return CanaryResult(self.model, True, time.monotonic() - t0, "answered")
        except InvalidRequestError as e:
            if self.prioritized and "priority" in str(e):
                self.prioritized = False  # the engine has no priorities: ask again without
                return await self._probe(settings)
            return CanaryResult(self.model, True, time.monotonic() - t0, f"answered with an error: {e}")
        except RequestTimeout:
            return CanaryResult(self.model, False, time.monotonic() - t0, f"no answer within {deadline:g}s")
        except ServerUnavailable as e:
            busy = "retry later" in str(e)
            return CanaryResult(self.model, busy, time.monotonic() - t0, f"{'busy' if busy else 'unavailable'}: {e}")
        except ClientError as e:  # INTERNAL: the model failed it (a stub Triton found "not healthy", ...)
            return CanaryResult(self.model, False, time.monotonic() - t0, f"failed: {e}")
        finally:
            await client.close()


def probe_openai(base_url: str, deadline_s: float, api_key: str | None = None) -> CanaryResult:
    """A one-token completion through the OpenAI front (model from its /v1/models)."""
    t0 = time.monotonic()
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"{base_url}/v1/models", headers=headers), timeout=deadline_s
        ) as r:
            model = json.load(r)["data"][0]["id"]
        body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 1, "temperature": 0}).encode()
        left = max(0.1, deadline_s - (time.monotonic() - t0))
        with urllib.request.urlopen(
            urllib.request.Request(f"{base_url}/v1/completions", body, headers), timeout=left
        ) as r:
            r.read()
        return CanaryResult("openai", True, time.monotonic() - t0, "answered")
    except urllib.error.HTTPError as e:  # the front answered; 502/504: Triton did not
        answered = e.code < 500 or e.code == 503
        return CanaryResult("openai", answered, time.monotonic() - t0, f"HTTP {e.code}")
    except (OSError, ValueError, KeyError, IndexError) as e:  # timeouts are OSErrors too
        return CanaryResult("openai", False, time.monotonic() - t0, f"no answer within {deadline_s:g}s: {e}")


@dataclass
class Canary:
    """The canaries of one server's entries."""

    grpc_url: str
    models: tuple[str, ...]
    openai_url: str | None = None
    openai_api_key: str | None = None
    settings: CanarySettings = field(default_factory=CanarySettings)

    def __post_init__(self) -> None:
        self.settings.validate()
        self._entries = [EntryCanary(self.grpc_url, m) for m in self.models]

    async def probe_async(self) -> list[CanaryResult]:
        jobs = [entry.probe(self.settings) for entry in self._entries]
        if self.openai_url:
            jobs.append(
                asyncio.to_thread(
                    probe_openai, self.openai_url, self.settings.unprioritized_deadline_s, self.openai_api_key
                )
            )
        return list(await asyncio.gather(*jobs))

    def probe(self) -> list[CanaryResult]:
        return asyncio.run(self.probe_async())


@dataclass
class WedgeTracker:
    """Consecutive canary failures per entry: which entries fail now (not ready) and which
    have failed `failures_to_wedge` times in a row (wedged), and how many wedges so far."""

    failures_to_wedge: int
    failures: dict[str, int] = field(default_factory=dict)
    wedges: dict[str, int] = field(default_factory=dict)  # entry -> wedges seen (counted once each)

    def record(self, results: list[CanaryResult]) -> list[CanaryResult]:
        """Take one round of results; returns the failures of entries now wedged."""
        wedged = []
        for result in results:
            count = 0 if result.answered else self.failures.get(result.entry, 0) + 1
            self.failures[result.entry] = count
            if count == self.failures_to_wedge:
                self.wedges[result.entry] = self.wedges.get(result.entry, 0) + 1
            if count >= self.failures_to_wedge:
                wedged.append(result)
        return wedged

    def failing(self) -> list[str]:
        return sorted(entry for entry, count in self.failures.items() if count)

    def reset(self) -> None:
        """A new server: nothing fails yet (the wedge counts stay)."""
        self.failures.clear()


class CanaryWatch:
    """The canary every `period_s` on a thread of its own, once `ready()` says the server has
    loaded its models; `wedged()` says why once an entry failed `failures_to_wedge` times in a
    row (gpu-up stops the server then: serving/gpu_launcher.py supervise)."""

    def __init__(self, canary: Canary, ready, report=print) -> None:
        self.canary = canary
        self._ready = ready
        self._report = report
        self._tracker = WedgeTracker(canary.settings.failures_to_wedge)
        self._why: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="canary", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def wedged(self) -> str | None:
        return self._why

    def _loop(self) -> None:
        while not self._stop.wait(self.canary.settings.period_s) and self._why is None:
            if not self._ready():
                continue
            results = self.canary.probe()
            for result in results:
                if not result.answered:
                    self._report(f"canary: {result.entry}: {result.detail}")
            wedged = self._tracker.record(results)
            if wedged:
                self._why = "wedged: " + "; ".join(f"{r.entry} gave no answer ({r.detail})" for r in wedged)
