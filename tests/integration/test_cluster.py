"""Two CPU replicas of the default model (exact numerics) behind NVIDIA Dynamo 1.6.1's frontend,
KV-aware router and request migration, each fronted by the kit's Dynamo worker
(cluster/worker.py): answers equal the single server's, shared-prefix conversations stay on the
replica that holds their prefix (read from the replicas' own prefix-cache metrics), a replica
killed under streaming load loses no request and duplicates no token and rejoins, an added
replica takes traffic, a client that leaves frees its engine slot, bad requests fail alone."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import time

import openai
import psutil
import pytest

from client import ChatMessage, LlmClient, SamplingParams
from cluster.launcher import Cluster, free_base_port
from cluster.topology import ClusterSpec
from contract import metrics
from serving import ports, prometheus
from serving.openai_process import served_model_name
from serving.side_environments import dynamo_venv

pytestmark = [pytest.mark.server, pytest.mark.slow]

MODEL = "SmolLM2-135M-Instruct"
STORIES = [f"Write a long story about a {animal} who learns to sail." for animal in
           ("cat", "dog", "fox", "owl", "bear", "wolf", "hare", "crow")]


@pytest.fixture(scope="module")
def cluster(repository, tmp_path_factory):
    spec = ClusterSpec(repository=repository, model_name=served_model_name(repository), replicas=2,
                       frontend_port=ports.free_loopback_port(), base_port=free_base_port(3),
                       state_dir=tmp_path_factory.mktemp("cluster"), dynamo_python=dynamo_venv() / "bin" / "python",
                       exit_timeout_s=10)
    c = Cluster(spec, report=lambda message: print(f"[cluster] {message}"))
    try:
        c.start()
        c.wait_ready(600)
        yield c
    finally:
        started = [k.pid for k in (c.frontend, *(k for r in c.replicas.values() for k in (r.server, r.worker)))]
        c.stop()
        # stopped cleanly: nothing of the cluster is left, its tritonservers included
        grpc_flags = {f"--grpc-port={spec.ports(i).grpc}" for i in range(3)}
        left = [p.pid for p in psutil.process_iter(["cmdline"]) if p.pid in started
                or any(str(spec.state_dir) in part or part in grpc_flags for part in p.info["cmdline"] or [])]
        assert not left, f"left running after stop: {left}"


@pytest.fixture(scope="module")
def openai_client(cluster):
    with openai.OpenAI(base_url=f"{cluster.spec.frontend_url}/v1", api_key="unused", max_retries=0, timeout=300) as c:
        yield c


def replica_metrics(cluster: Cluster, index: int) -> list[prometheus.Sample]:
    return prometheus.scrape(f"http://127.0.0.1:{cluster.spec.ports(index).metrics}/metrics")


def counter(cluster: Cluster, name: str) -> dict[int, float]:
    return {i: prometheus.value(replica_metrics(cluster, i), name) for i in sorted(cluster.replicas)}


def grown(cluster: Cluster, name: str, before: dict[int, float], timeout_s: float = 5.0) -> dict[int, float]:
    """The counters once one has grown past `before` (the engines publish their metrics a moment
    after a request ends), or as they are at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = counter(cluster, name)
        if any(now[i] > before.get(i, 0.0) for i in now) or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def chat(client, content: str, max_tokens: int = 48, **kwargs) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                          max_tokens=max_tokens, temperature=0, **kwargs)


def test_answers_through_dynamo_equal_the_single_servers(cluster, openai_client):
    """Greedy chat through Dynamo's frontend (its chat template, its detokenizer) and the same
    prompt through one replica's ensemble (our preprocessing and postprocessing): the same text,
    the same token counts; streamed == whole."""
    with LlmClient(f"127.0.0.1:{cluster.spec.ports(0).grpc}") as single:
        for prompt in ("What is the capital of France?", "Name three primary colours.", STORIES[0]):
            ours = single.generate([ChatMessage("user", prompt)], SamplingParams(max_tokens=48, temperature=0))
            theirs = chat(openai_client, prompt)
            assert theirs.choices[0].message.content == ours.text, prompt
            assert theirs.choices[0].finish_reason == ours.finish_reason
            assert (theirs.usage.prompt_tokens, theirs.usage.completion_tokens) == \
                (ours.prompt_tokens, ours.completion_tokens)
            streamed = "".join(c.choices[0].delta.content or "" for c in
                               chat(openai_client, prompt, stream=True) if c.choices)
            assert streamed == ours.text


def test_log_probs_come_through_in_openais_shape(openai_client):
    reply = chat(openai_client, "What is the capital of France?", max_tokens=6, logprobs=True, top_logprobs=2)
    content = reply.choices[0].logprobs.content
    assert len(content) == reply.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 2 and entry.token and entry.logprob <= 0


def test_shared_prefix_conversations_stay_on_the_replica_that_holds_the_prefix(cluster, openai_client):
    """Two multi-turn conversations, each with its own long system prompt: every turn after the
    first lands on the replica that served the first (the one replica whose prefix-cache
    queries grew), and most of its prompt is found in that replica's cache."""
    for conversation in range(2):
        system = f"Conversation {conversation}. " + " ".join(
            f"Rule {i}: answer politely and cite section {i} of manual {conversation}." for i in range(40))
        messages = [{"role": "system", "content": system}]
        served_by, hits, queries = [], 0.0, 0.0
        for turn in range(4):
            messages.append({"role": "user", "content": f"Question {turn}: what is {turn} plus {conversation}?"})
            before_q = counter(cluster, metrics.PREFIX_CACHE_QUERIES.name)
            before_h = counter(cluster, metrics.PREFIX_CACHE_HITS.name)
            reply = openai_client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
            after_q = grown(cluster, metrics.PREFIX_CACHE_QUERIES.name, before_q)
            after_h = counter(cluster, metrics.PREFIX_CACHE_HITS.name)
            grew = [i for i in after_q if after_q[i] > before_q[i]]
            assert len(grew) == 1, (turn, before_q, after_q)
            served_by.append(grew[0])
            if turn:
                hits += after_h[grew[0]] - before_h[grew[0]]
                queries += after_q[grew[0]] - before_q[grew[0]]
        assert len(set(served_by)) == 1, f"conversation {conversation} moved between replicas: {served_by}"
        assert hits / queries > 0.8, (hits, queries)


def _find_tritonserver(cluster: Cluster, index: int) -> psutil.Process:
    flag = f"--grpc-port={cluster.spec.ports(index).grpc}"
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info["name"] == "tritonserver" and flag in (p.info["cmdline"] or []):
            return p
    raise AssertionError(f"no tritonserver with {flag}")


async def _stream(client: openai.AsyncOpenAI, prompt: str, max_tokens: int):
    stream = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
        stream=True, stream_options={"include_usage": True})
    text, finish, usage = [], None, None
    async for chunk in stream:
        if chunk.choices:
            text.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    return "".join(text), finish, usage


def test_a_replica_killed_under_streaming_load_loses_no_request_and_duplicates_no_token(cluster):
    """kill -9 of the tritonserver serving the most streams: Dynamo's frontend migrates each of
    them (prompt + the tokens sent so far) to the other replica; every client gets the whole
    answer, byte-equal to the answer with no failure (exact numerics: batch-invariant greedy),
    with the right counts.  Then the replica is restarted by its supervisor and its worker
    registers again."""
    max_tokens = 150

    async def run():
        async with openai.AsyncOpenAI(base_url=f"{cluster.spec.frontend_url}/v1", api_key="x", max_retries=0,
                                      timeout=300) as client:
            # the answers with no failure, at the same load (exact numerics: equal alone or batched)
            references = await asyncio.gather(*(_stream(client, p, max_tokens) for p in STORIES))
            tasks = [asyncio.create_task(_stream(client, p, max_tokens)) for p in STORIES]
            await asyncio.sleep(1.5)
            running = {i: prometheus.value(replica_metrics(cluster, i), metrics.REQUESTS_RUNNING.name)
                       for i in cluster.replicas}
            victim = max(running, key=running.get)
            registered = {i["instance_id"] for i in cluster.instances()}
            _find_tritonserver(cluster, victim).send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            return references, results, running, victim, killed_at, registered

    references, results, running, victim, killed_at, registered = asyncio.run(run())
    assert running[victim] >= 1, f"no stream ran on the killed replica: {running}"
    lost = [r for r in results if isinstance(r, BaseException)]
    assert not lost, f"{len(lost)} requests lost: {lost[:2]}"
    for (text, finish, usage), (ref_text, ref_finish, ref_usage) in zip(results, references):
        assert text == ref_text  # no token lost, none duplicated
        assert finish == ref_finish == "length"
        assert (usage.prompt_tokens, usage.completion_tokens) == (ref_usage.prompt_tokens, max_tokens)
    migrated = (cluster.spec.state_dir / "logs" / "frontend.log").read_text().count("migration retry scheduled")
    assert migrated >= running[victim]
    # the replica comes back (its supervisor restarts tritonserver, its worker registers anew) and takes traffic
    deadline = killed_at + 300
    while not (len(ids := {i["instance_id"] for i in cluster.instances()}) == 2 and ids != registered):
        assert time.monotonic() < deadline, "the killed replica did not rejoin"
        time.sleep(0.25)
    print(f"replica {victim} rejoined {time.monotonic() - killed_at:.1f}s after the kill")
    assert takes_traffic(cluster, victim)


def takes_traffic(cluster: Cluster, index: int, rounds: int = 5) -> bool:
    """Bursts of new prompts (no replica holds their prefix; the router balances the load) until
    the replica has generated tokens for one."""
    before = counter(cluster, metrics.GENERATED_TOKENS.name)[index]

    async def burst(n: int):
        async with openai.AsyncOpenAI(base_url=f"{cluster.spec.frontend_url}/v1", api_key="x", max_retries=0,
                                      timeout=300) as client:
            return await asyncio.gather(*(_stream(client, f"{n}-{i}: {p}", 16) for i, p in enumerate(STORIES)))

    for n in range(rounds):
        assert all(finish == "length" for _, finish, _ in asyncio.run(burst(n)))
        if grown(cluster, metrics.GENERATED_TOKENS.name, {index: before})[index] > before:
            return True
    return False


def test_a_replica_added_while_serving_takes_traffic(cluster, openai_client):
    added = cluster.add_replica()
    try:
        started = time.monotonic()
        cluster.wait_ready(300, instances=3)
        print(f"replica {added} registered {time.monotonic() - started:.1f}s after it was started")

        assert takes_traffic(cluster, added)
    finally:
        cluster.remove_replica(added)
    cluster.wait_ready(120)
    assert chat(openai_client, "Say hi.", max_tokens=4).choices[0].finish_reason == "length"


def test_a_client_that_leaves_frees_its_engine_slot(cluster):
    before = sum(counter(cluster, metrics.GENERATED_TOKENS.name).values())
    with openai.OpenAI(base_url=f"{cluster.spec.frontend_url}/v1", api_key="x", max_retries=0, timeout=300) as c:
        stream = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": STORIES[3]}],
                                           max_tokens=1500, stream=True, temperature=0,
                                           extra_body={"ignore_eos": True})
        for n, _ in enumerate(stream):
            if n == 5:
                break
        stream.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if not sum(prometheus.value(replica_metrics(cluster, i), metrics.REQUESTS_RUNNING.name)
                   for i in cluster.replicas):
            break
        time.sleep(0.2)
    else:
        pytest.fail("the abandoned request kept its engine slot")
    generated = sum(counter(cluster, metrics.GENERATED_TOKENS.name).values()) - before
    assert generated < 1500, f"the engine generated {generated} tokens for a client that left after 5"


@pytest.mark.parametrize("body, field", [
    ({"top_k": 1_000_000}, "top_k"),
    ({"min_p": 1.5}, "min_p"),
    ({"max_tokens": 100_000}, "request_output_len"),
    ({"n": 2, "logprobs": True, "top_logprobs": 30}, "logprobs"),
])
def test_a_bad_request_fails_alone_with_a_clear_error(openai_client, body, field):
    kwargs = {"max_tokens": 8, **body}
    extra = {k: kwargs.pop(k) for k in ("top_k", "min_p") if k in kwargs}
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                              extra_body=extra, **kwargs)
    # Dynamo's frontend checks min_p's range itself and capitalizes the name ("Min_p must be between 0 and 1")
    assert field in str(e.value) if field != "min_p" else "min_p must be between 0 and 1" in str(e.value).lower()
    assert chat(openai_client, "Say hi.", max_tokens=4).choices[0].finish_reason == "length"


def loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


def test_every_listener_of_the_cluster_is_on_loopback(cluster):
    """Nothing of the cluster listens beyond 127.0.0.1: Triton's three ports per replica, the
    workers' request plane, the frontend's HTTP and response stream (docs/cluster.md, "Addresses":
    Dynamo 1.6.1's ZMQ KV-event publishers bind 0.0.0.0 whatever DYN_EVENT_PLANE_HOST says; the
    router's approximate mode, which the CPU engine runs, starts none)."""
    keepers = [cluster.frontend] + [k for r in cluster.replicas.values() for k in (r.server, r.worker)]
    wide, seen = [], 0
    for keeper in keepers:
        root = psutil.Process(keeper.pid)
        for process in [root, *root.children(recursive=True)]:
            try:
                listeners = [c for c in process.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
            except psutil.Error:
                continue
            seen += len(listeners)
            wide += [(keeper.spec.name, process.name(), c.laddr) for c in listeners if not loopback(c.laddr.ip)]
    assert seen >= 3 * len(cluster.replicas) + 1  # Triton's ports and the frontend's at least
    assert not wide, wide
