"""JobService end to end: a real job server (grpc.aio on 127.0.0.1:0, in a thread) driven
through the sync JobClient: one test per RPC, the errors each maps to, auth, and secrets."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from gym_metrics._transport.client import JobClient, JobInfo, JobNotFinishedError, JobWaitTimeout, RemoteCallError, ServerUnreachableError
from gym_metrics.errors import GymMetricsError, InvalidInputError, NotFoundError
from gym_metrics.evaluation import evaluate
from gym_metrics.v1 import jobs_pb2, jobs_pb2_grpc

from _jobs_helpers import CountingEndpoint, remote_config, tool_row
from _service_helpers import JobServerThread

SECRET_NAME, SECRET_VALUE = "GYM_METRICS_TEST_SERVICE_KEY", "sk-service-secret-5e0c7a"


def wait_final(client: JobClient, job_id: str, timeout: float = 60) -> JobInfo:
    *_, last = client.watch(job_id, timeout=timeout)
    return last


def until(predicate: Any, seconds: float = 30) -> None:
    """Poll `predicate` every 20 ms, at most `seconds`."""
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


@pytest.fixture
def server(tmp_path: Path) -> Any:
    (tmp_path / "data").mkdir()
    with JobServerThread(tmp_path / "jobs.sqlite", data_root=tmp_path / "data") as running:
        yield running


def test_submit_watch_get_and_result_match_evaluate(server: JobServerThread) -> None:
    rows = [tool_row(i) for i in range(40)] + ["not an object"]
    with JobClient(server.address) as client:
        job = client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}, "run": {"parallelism": 4}})
        assert job.state == "QUEUED" and not job.final and job.spec["dataset"] == {} and job.spec["run"]["parallelism"] == 4
        seen = list(client.watch(job.job_id, timeout=60))
        got = client.get(job.job_id)
        result = client.result(job.job_id)
    assert seen[-1].final and all(not s.final for s in seen[:-1])
    assert (got.state, got.done, got.failed, got.total) == ("SUCCEEDED", 41, 1, 41)
    assert got.rows_per_second > 0  # a finished job keeps its rate (it was 0.0)
    assert "rows" not in orjson.dumps(got.spec).decode()
    assert result == evaluate("tool_call_accuracy", rows, parallelism=4).to_dict()


def test_result_comes_in_bounded_parts(server: JobServerThread) -> None:
    assert server.running is not None
    server.running.servicer.jobs.part_bytes = 500
    rows = [tool_row(i) for i in range(50)]
    with JobClient(server.address) as client:
        job = client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}})
        wait_final(client, job.job_id)
        whole = client.result(job.job_id)
    with grpc.insecure_channel(server.address) as channel:
        parts = list(jobs_pb2_grpc.JobServiceStub(channel).GetJobResult(jobs_pb2.GetJobResultRequest(job_id=job.job_id), timeout=30))
    assert parts[0].WhichOneof("part") == "aggregate_scores_json"
    row_parts = [p.row_scores for p in parts[1:]]
    assert len(row_parts) > 3 and all(p.ByteSize() < 500 + 100 for p in row_parts)
    assert [orjson.loads(t) for p in row_parts for t in p.rows_json] == whole["row_scores"]
    assert [r["index"] for r in whole["row_scores"]] == list(range(50))


def test_list_pages_in_submission_order_and_filters_by_state(server: JobServerThread) -> None:
    with JobClient(server.address) as client:
        ids = [client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(i)]}}).job_id for i in range(5)]
        for job_id in ids:
            wait_final(client, job_id)
        listed: list[str] = []
        token, pages = "", 0
        while pages < 10:  # bounded
            page, token = client.list(page_size=2, page_token=token)
            listed += [j.job_id for j in page]
            pages += 1
            if not token:
                break
        assert listed == ids and pages == 3
        assert [j.job_id for j in client.list("SUCCEEDED")[0]] == ids
        assert client.list("running") == ([], "")
        with pytest.raises(InvalidInputError) as err:
            client.list(page_token="not-a-token")
        assert err.value.violations[0].field == "page_token"


def test_cancel_stops_a_running_job(server: JobServerThread) -> None:
    with CountingEndpoint(delay=0.2) as endpoint, JobClient(server.address) as client:
        job = client.submit({"scorer": "remote", "scorer_config": remote_config(endpoint.url),
                             "dataset": {"rows": [{"id": i} for i in range(300)]}, "run": {"parallelism": 2}})  # fmt: skip
        until(lambda: client.get(job.job_id).done >= 2)
        started = time.monotonic()
        assert client.cancel(job.job_id).job_id == job.job_id
        final = wait_final(client, job.job_id, timeout=30)
        took = time.monotonic() - started
        assert final.state == "CANCELLED" and 2 <= final.done < 300
        assert took < 5  # the goal is 1 s; generous for a loaded machine
        assert client.cancel(job.job_id).state == "CANCELLED"  # idempotent
        assert len(client.result(job.job_id)["row_scores"]) == final.done  # what its rows stored


def test_watch_timeout_and_result_before_the_end(server: JobServerThread) -> None:
    with CountingEndpoint(delay=0.2) as endpoint, JobClient(server.address) as client:
        job = client.submit({"scorer": "remote", "scorer_config": remote_config(endpoint.url),
                             "dataset": {"rows": [{"id": i} for i in range(100)]}, "run": {"parallelism": 1}})  # fmt: skip
        with pytest.raises(JobWaitTimeout):
            list(client.watch(job.job_id, timeout=0.5))
        with pytest.raises(JobNotFinishedError):
            client.result(job.job_id)
        client.cancel(job.job_id)


def test_unknown_jobs_are_not_found(server: JobServerThread) -> None:
    with JobClient(server.address) as client:
        for call in (client.get, client.cancel, client.result, lambda j: list(client.watch(j))):
            with pytest.raises(NotFoundError, match="no job 'nope'"):
                call("nope")


def test_an_invalid_spec_names_the_field(server: JobServerThread) -> None:
    with JobClient(server.address) as client:
        with pytest.raises(InvalidInputError) as err:
            client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [{}]}, "run": {"parallelism": -1}})
        assert [v.field for v in err.value.violations] == ["spec.run.parallelism"]  # from the request's top
        with pytest.raises(InvalidInputError) as err:
            client.submit({"scorer": "no_such_scorer", "dataset": {"rows": [{}]}})
        assert err.value.violations[0].field == "spec.scorer"
        with pytest.raises(InvalidInputError) as err:
            client.submit({"scorer": "tool_call_accuracy", "dataset": {"path": "../outside.jsonl"}})
        assert err.value.violations[0].field == "spec.dataset.path" and "escapes the data root" in str(err.value)
        assert client.list() == ([], "")
    spec = jobs_pb2.JobSpec(scorer="tool_call_accuracy")
    spec.dataset.rows.rows_json.extend(["{}", "{}", "{}", "{not json"])
    with grpc.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as raw:
            jobs_pb2_grpc.JobServiceStub(channel).SubmitJob(jobs_pb2.SubmitJobRequest(spec=spec), timeout=30)
    assert raw.value.code() is grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    status = rpc_status.from_call(raw.value)  # type: ignore[arg-type]
    assert status is not None
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad)
    assert bad.field_violations[0].field == "spec.dataset.rows.rows_json[3]"


def test_the_auth_token_is_required(tmp_path: Path) -> None:
    with JobServerThread(tmp_path / "jobs.sqlite", auth_token="s3cret-token") as server:
        with JobClient(server.address) as anonymous, pytest.raises(RemoteCallError, match="UNAUTHENTICATED"):
            anonymous.list()
        with JobClient(server.address, auth_token="wrong") as wrong, pytest.raises(RemoteCallError, match="invalid bearer token"):
            wrong.get("x")
        with JobClient(server.address, auth_token="s3cret-token") as client:
            assert client.list() == ([], "")


def test_an_unreachable_server() -> None:
    with JobClient("127.0.0.1:1", timeout=10) as client, pytest.raises(ServerUnreachableError):
        client.get("x")


def test_a_secret_value_never_appears_in_an_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_NAME, raising=False)
    secrets = tmp_path / "secrets.json"
    secrets.write_bytes(orjson.dumps({SECRET_NAME: SECRET_VALUE}))
    secrets.chmod(0o600)
    answers: list[Any] = []
    with CountingEndpoint() as endpoint, JobServerThread(tmp_path / "jobs.sqlite", secrets_file=secrets) as server:
        with JobClient(server.address) as client:
            config = remote_config(endpoint.url, api_key_env=SECRET_NAME)
            job = client.submit({"scorer": "remote", "scorer_config": config, "dataset": {"rows": [{"id": i} for i in range(5)]},
                                 "secrets": [SECRET_NAME]})  # fmt: skip
            answers += [job, *client.watch(job.job_id, timeout=60), client.get(job.job_id), client.list(), client.result(job.job_id)]
            answers.append(client.cancel(job.job_id))
    assert answers[-1].state == "SUCCEEDED"
    assert all(r.header("Authorization") == f"Bearer {SECRET_VALUE}" for r in endpoint.requests)
    assert SECRET_NAME in repr(answers[0].spec)  # the name is shown, never the value
    assert not any(SECRET_VALUE in repr(a) for a in answers)


def test_health_and_reflection_list_the_job_service(tmp_path: Path) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with JobServerThread(tmp_path / "jobs.sqlite", auth_token="t") as server, grpc.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="gym_metrics.v1.JobService"), timeout=10)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        answers = list(reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(iter([request]), timeout=10))
    assert health.status == health_pb2.HealthCheckResponse.SERVING  # no token needed for probes
    names = {s.name for s in answers[0].list_services_response.service}
    assert {"gym_metrics.v1.JobService", "grpc.health.v1.Health"} <= names


def test_a_watch_ends_on_the_server_when_the_client_goes_away(server: JobServerThread) -> None:
    assert server.running is not None
    servicer = server.running.servicer
    with CountingEndpoint(delay=0.2) as endpoint, JobClient(server.address) as client:
        job = client.submit({"scorer": "remote", "scorer_config": remote_config(endpoint.url),
                             "dataset": {"rows": [{"id": i} for i in range(100)]}, "run": {"parallelism": 1}})  # fmt: skip
        watch = client.watch(job.job_id)
        assert next(watch).job_id == job.job_id
        until(lambda: servicer.jobs.watching == 1)
        watch.close()  # the client leaves (its call is cancelled)
        until(lambda: servicer.jobs.watching == 0, seconds=10)
        client.cancel(job.job_id)


@pytest.mark.parametrize("blocked", ["create_once", "list_jobs"])
def test_database_work_never_holds_the_event_loop(tmp_path: Path, blocked: str) -> None:
    """The regression: SubmitJob and ListJobs ran their database work on the event loop, so a
    large submit stalled health checks for seconds. Here the store call is held on purpose; a
    health check and a GetJob must still be answered meanwhile."""
    import threading

    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with JobServerThread(tmp_path / "jobs.sqlite") as server, JobClient(server.address) as client:
        known = client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(0)]}})
        store = server.running.executor.store  # type: ignore[union-attr]
        entered, release = threading.Event(), threading.Event()
        original = getattr(store, blocked)

        def held(*args: Any, **kwargs: Any) -> Any:
            entered.set()
            release.wait(30)
            return original(*args, **kwargs)

        setattr(store, blocked, held)
        call = (lambda: client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(1)]}})) if blocked == "create_once" else client.list
        worker = threading.Thread(target=call)
        worker.start()
        try:
            assert entered.wait(30), f"{blocked} was never called"
            with grpc.insecure_channel(server.address) as channel:
                health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            assert client.get(known.job_id).job_id == known.job_id
        finally:
            release.set()
            worker.join(30)
        setattr(store, blocked, original)


def test_a_submitter_cannot_name_a_variable_of_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the wire: the server's own token variable, named as a job's key, is refused with the
    answer an unknown name gets, and the submitter's listener hears nothing."""
    monkeypatch.setenv("GYM_METRICS_AUTH_TOKEN", "server-token-1a2b3c")
    monkeypatch.delenv("NOT_A_VARIABLE_Q", raising=False)
    with CountingEndpoint() as listener, JobServerThread(tmp_path / "jobs.sqlite", auth_token="server-token-1a2b3c") as server:
        with JobClient(server.address, auth_token="server-token-1a2b3c") as client:
            answers = []
            for name in ("GYM_METRICS_AUTH_TOKEN", "NOT_A_VARIABLE_Q"):
                with pytest.raises(InvalidInputError) as err:
                    client.submit({"scorer": "remote", "scorer_config": remote_config(listener.url, api_key_env=name),
                                   "dataset": {"rows": [{"id": 1}]}})  # fmt: skip
                answers.append(str(err.value).replace(name, "NAME"))
            assert client.list() == ([], "")
    assert answers[0] == answers[1] and "server-token-1a2b3c" not in answers[0]
    assert listener.requests == []


def test_parallelism_over_the_servers_ceiling_is_invalid_argument(tmp_path: Path) -> None:
    with JobServerThread(tmp_path / "jobs.sqlite", max_parallelism=32) as server, JobClient(server.address) as client:
        with pytest.raises(InvalidInputError) as err:
            client.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": []}, "run": {"parallelism": 1_000_000}})
    assert "run.parallelism" in str(err.value)


def test_what_a_job_run_will_refuse_is_refused_at_submission(tmp_path: Path) -> None:
    """A target's requests in flight above the ceiling ran anyway (the run keeps as many rows in
    flight as its target allows: 47 at once under a ceiling of 4), and a template that does not
    compile, one without messages, a template with an agent target, and a target key bound to
    other hosts were queued and failed later. Each is INVALID_ARGUMENT at submission now, naming
    the target's own fields; a job that names no parallelism gets the default within the ceiling."""
    model = {"type": "model", "url": "http://127.0.0.1:9/v1", "model": "m"}
    rows = {"rows": [tool_row(1)]}
    cases = [
        ({"target": {**model, "max_concurrency": 48}}, "spec.target_json.max_concurrency: 48 is over this server's ceiling of 4"),
        ({"target": model, "prompt_template": {"messages": [{"role": "user", "content": "{{ item.x "}]}}, "does not compile"),
        ({"target": model, "prompt_template": {"temperature": 0}}, "spec.prompt_template_json.messages: missing"),
        ({"target": {"type": "agent", "url": "http://127.0.0.1:9/a", "body": {"q": "{{ item.x }}"}, "response_path": "a"},
          "prompt_template": {"messages": []}}, "a prompt template goes with a model target"),  # fmt: skip
    ]
    with JobServerThread(tmp_path / "jobs.sqlite", max_parallelism=4) as server, JobClient(server.address) as client:
        for extra, expected in cases:
            with pytest.raises(InvalidInputError) as err:
                client.submit({"scorer": "tool_call_accuracy", "dataset": rows, "run": {"parallelism": 2}, **extra})
            assert expected in str(err.value), (extra, str(err.value))
        assert client.list() == ([], "")
        job = client.submit({"scorer": "tool_call_accuracy", "dataset": rows})  # no parallelism: 16 would be over 4
        assert [info for info in client.watch(job.job_id, timeout=30)][-1].state == "SUCCEEDED"


def test_a_submission_whose_client_left_before_it_was_stored_is_not_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client gave up (its deadline passed while the server decoded and checked a large
    inline dataset): the job was stored and run all the same, and a client that retries ran it
    twice. The checks are made slow here (0.6 s, past the call's 0.2 s deadline) so the client
    surely leaves during them: 120,000 real rows took under 0.2 s on a fast machine."""
    from gym_metrics.jobs import JobExecutor, JobStore

    executor = JobExecutor(JobStore(tmp_path / "direct.sqlite"))
    with pytest.raises(GymMetricsError, match="the client went away before its job was stored"):
        executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(1)]}}, wanted=lambda: False)
    assert executor.store.list_jobs() == []

    checked = []
    validate = JobExecutor.validate

    def slow_validate(self: JobExecutor, spec: Any) -> None:
        validate(self, spec)
        time.sleep(0.6)
        checked.append(True)

    monkeypatch.setattr(JobExecutor, "validate", slow_validate)
    spec = jobs_pb2.JobSpec(scorer="tool_call_accuracy")
    spec.dataset.rows.rows_json.extend([orjson.dumps(tool_row(1)).decode()] * 1_000)
    with JobServerThread(tmp_path / "jobs.sqlite") as server, grpc.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as err:
            jobs_pb2_grpc.JobServiceStub(channel).SubmitJob(jobs_pb2.SubmitJobRequest(spec=spec), timeout=0.2)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        deadline = time.monotonic() + 10
        while not checked and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # (what the server did after the checks has ended)
        with JobClient(server.address) as client:
            assert checked and client.list() == ([], "")


class _LosesFirstAnswer:
    """A TCP proxy on loopback in front of `target`: its first connection is cut as soon as the
    server answers (the job stored, its answer lost: a broken connection, a timeout), later
    ones pass through."""

    def __init__(self, target: str) -> None:
        import socket
        import threading

        self.host, port = target.rsplit(":", 1)
        self.target_port = int(port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            server = socket.create_connection((self.host, self.target_port))
            cut = self.connections == 1
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, cut), daemon=True).start()

    @staticmethod
    def _pipe(source: Any, sink: Any, cut_at_answer: bool) -> None:
        """Copy `source` to `sink`; with `cut_at_answer`, frame by frame (HTTP/2: a 9-byte header,
        its length in the first 3, its type in the 4th), cut before the first HEADERS frame (type
        1) of a stream: the answer. (Reading only a chunk's first frame missed a HEADERS frame that
        came in one chunk behind a SETTINGS or WINDOW_UPDATE frame, and the answer got through.)"""
        import socket

        pending = b""
        try:
            while data := source.recv(65536):
                if not cut_at_answer:
                    sink.sendall(data)
                    continue
                pending += data
                whole = 0
                while len(pending) - whole >= 9:
                    length, kind = int.from_bytes(pending[whole : whole + 3], "big"), pending[whole + 3]
                    if kind == 1 and int.from_bytes(pending[whole + 5 : whole + 9], "big") & 0x7FFFFFFF:
                        sink.sendall(pending[:whole])
                        raise OSError("the answer begins: cut")
                    if len(pending) - whole < 9 + length:
                        break
                    whole += 9 + length
                sink.sendall(pending[:whole])
                pending = pending[whole:]
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self.listener.close()


def test_a_submission_whose_answer_was_lost_is_sent_again_and_runs_once(server: JobServerThread) -> None:
    """The job was stored, its answer lost: the client said the server was unreachable and a
    user (or a retrying script) submitting again ran the dataset twice."""
    proxy = _LosesFirstAnswer(server.address)
    spec = {"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(1), tool_row(2)]}}
    try:
        with JobClient(proxy.address) as client:
            info = client.submit(spec)  # the first answer lost, asked again with the same request_id
    finally:
        proxy.close()
    assert proxy.connections >= 2
    with JobClient(server.address) as client:
        assert [j.job_id for j in client.list()[0]] == [info.job_id]  # one job
        again = client.submit(spec, request_id="fixed-id-1")
        assert client.submit(spec, request_id="fixed-id-1").job_id == again.job_id != info.job_id
        assert len(client.list()[0]) == 2
        other = {**spec, "dataset": {"rows": [tool_row(3)]}}
        with pytest.raises(InvalidInputError) as reused:
            client.submit(other, request_id="fixed-id-1")
        assert [v.field for v in reused.value.violations] == ["request_id"] and again.job_id in reused.value.violations[0].description
        with pytest.raises(InvalidInputError) as bad:
            client.submit(spec, request_id="no spaces allowed")
        assert [v.field for v in bad.value.violations] == ["request_id"]


@pytest.mark.parametrize("where", ["db", "wal beside it", "secrets_file"])
def test_the_database_or_secrets_under_the_data_root_are_refused_at_start(tmp_path: Path, where: str) -> None:
    """A job names its dataset by a path under --data-root: the database there (or its WAL, a
    sibling) was every other job's rows, sent to any scorer; the secrets file, the keys."""
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    secrets = tmp_path / "secrets.json"
    db = tmp_path / "jobs.sqlite"
    if where == "secrets_file":
        secrets = root / "sub" / "secrets.json"
    else:
        db = root / "jobs.sqlite" if where == "db" else root / "sub" / "jobs.sqlite"
    secrets.write_text("{}")
    secrets.chmod(0o600)
    with pytest.raises(InvalidInputError) as err, JobServerThread(db, data_root=root, secrets_file=secrets):
        pass
    assert [v.field for v in err.value.violations] == ["secrets_file" if where == "secrets_file" else "db"]
    assert "--data-root" in err.value.violations[0].description and not db.exists()
    with JobServerThread(tmp_path / "ok.sqlite", data_root=root) as server:  # beside the data root, not under it
        assert server.address
