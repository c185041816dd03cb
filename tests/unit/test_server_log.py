from serving.server_log import Failed, Readiness, ServerLog, Service, Started, parse_line

PID = 23456
PORTS = {Service.HTTP: 18100, Service.GRPC: 18101, Service.METRICS: 18102}
# Lines as Triton 2.51 writes them (build/logs/tritonserver.log).
STARTED_LINES = [
    'I1123 16:53:19.959157 23456 grpc_server.cc:2558] "Started GRPCInferenceService at 127.0.0.1:18101"',
    'I1123 16:53:19.959485 23456 http_server.cc:4713] "Started HTTPService at 127.0.0.1:18100"',
    'I1123 16:53:20.003092 23456 http_server.cc:362] "Started Metrics Service at 127.0.0.1:18102"',
]
GRPC_BIND = ('E1123 16:56:11.740561948   23456 chttp2_server.cc:1060]                UNKNOWN:No address added out of '
             'total 1 resolved for \'127.0.0.1:18101\' {children:[UNKNOWN:Address already in use {syscall:"bind"}]}')
GRPC_FAILED = 'E1123 16:56:11.744293 23456 main.cc:245] "failed to start GRPC service: Unavailable - Socket \'127.0.0.1:18101\' already in use "'


def test_started_lines_of_our_pid_name_service_and_port():
    assert [parse_line(line, PID) for line in STARTED_LINES] == [
        Started(Service.GRPC, 18101), Started(Service.HTTP, 18100), Started(Service.METRICS, 18102)]


def test_lines_of_another_process_never_count():
    assert all(parse_line(line, PID + 1) is None for line in [*STARTED_LINES, GRPC_FAILED])


def test_failures_are_reported_with_their_line():
    assert parse_line(GRPC_FAILED, PID) == Failed(GRPC_FAILED)
    assert parse_line(GRPC_BIND, PID) == Failed(GRPC_BIND.strip())


def test_other_lines_say_nothing():
    for line in ['I1123 16:53:19.9 23456 server.cc:1] "Started something else at 1.2.3.4:5"',
                 'I1123 16:53:19.9 23456 model_lifecycle.cc:849] "successfully loaded \'ensemble\'"',
                 "Started HTTPService at 127.0.0.1:18100",  # not a Triton log line (a model's print)
                 "", "+----+"]:
        assert parse_line(line, PID) is None


def test_ready_only_when_every_service_started_on_its_own_port():
    readiness = Readiness(dict(PORTS))
    for line in STARTED_LINES[:2]:
        readiness.add(parse_line(line, PID))
    assert not readiness.services_started and readiness.waiting_for() == "'Started Metrics Service at ...:18102'"
    readiness.add(parse_line(STARTED_LINES[2], PID))
    assert readiness.services_started and not readiness.failures


def test_a_service_on_another_port_is_a_failure():
    readiness = Readiness(dict(PORTS))
    readiness.add(Started(Service.HTTP, 8000))
    assert readiness.failures == ["HTTPService started on port 8000, not on 18100"]


def test_log_is_read_from_the_offset_and_line_by_line(tmp_path):
    log = tmp_path / "tritonserver.log"
    log.write_text("\n".join(STARTED_LINES) + "\n")  # an earlier run of the same pid number: not ours
    server_log = ServerLog(log, log.stat().st_size, PID, dict(PORTS))
    assert not server_log.poll().started
    with open(log, "a") as f:
        f.write(STARTED_LINES[0] + "\n" + STARTED_LINES[1][:30])  # the second line half written
    assert server_log.poll().started == {Service.GRPC}
    with open(log, "a") as f:
        f.write(STARTED_LINES[1][30:] + "\n" + STARTED_LINES[2] + "\n")
    assert server_log.poll().services_started


def test_a_missing_log_is_not_ready_yet(tmp_path):
    assert not ServerLog(tmp_path / "none.log", 0, PID, dict(PORTS)).poll().services_started
