"""A backlog on a broker waits on whoever should drain it: its consumers, named by the connections its own
lines record or by the consumer group its lag series carries. Test code builds the tool results by hand
(``support.Results``)."""

import pytest

from diagnosis.localisation.kinds import word_votes
from diagnosis.localisation.outcome import localise
from tests.localisation.support import Results, flat, stepped

BROKER, CONSUMER, PRODUCER = "vaskel", "drumo", "plinkor"


def _services_book(results: Results) -> None:
    results._add("query_kubernetes", {"kind": "service"}, {"pods": [], "events": [], "services": [
        {"name": name, "clusterIP": f"10.96.7.{i}", "selector": {"app": name},
         "endpoints": [{"ip": f"10.244.{i}.5", "pod": f"{name}-0", "node": "pool-a-1", "ready": True}]}
        for i, name in ((11, BROKER), (12, CONSUMER), (13, PRODUCER))]})


def _a_broker_whose_unacked_messages_pile_up() -> Results:
    """vaskel's queue fills up; its own lines only record the AMQP sessions its clients open."""
    results = Results()
    results.metric({"__name__": "rabbitmq_queue_messages_unacked", "service": BROKER, "queue": "orders"},
                   stepped(3, 900, 40))
    results.metric({"__name__": "rabbitmq_connections", "service": BROKER}, flat(6))
    results.logs(BROKER, [(-3400 + i * 150, "", f"<0.{900 + i}.0> accepting AMQP connection <0.{300 + i}.0> "
                                                f"(10.244.{12 + i % 2}.5:{41000 + i} -> 10.244.11.5:5672)")
                          for i in range(20)])
    _services_book(results)
    return results


def test_a_backlog_alone_is_not_decisive_while_the_clients_that_drain_it_are_unexamined():
    found = localise(_a_broker_whose_unacked_messages_pile_up().items, [BROKER])
    assert (found.outcome, found.reason, found.root) == ("undetermined", "dependency_not_examined", BROKER)
    checks = [(c.tool, c.arguments) for c in found.next_checks]
    assert ("query_logs", {"service": CONSUMER}) in checks and ("query_logs", {"service": PRODUCER}) in checks


def test_the_consumer_that_cannot_read_a_message_is_the_root_of_the_broker_s_backlog():
    results = _a_broker_whose_unacked_messages_pile_up()
    results.logs(CONSUMER, [(-3300 + i * 150, "", f"processed order {7000 + i} in {12 + i % 4} ms") for i in range(16)]
                 + [(-1500 + i * 60, "ERROR", f"failed to process message delivery tag {8812} on queue orders, "
                                              f"redelivering (attempt {i + 2}) err=\"Unexpected token < in JSON at "
                                              f"position 0\"") for i in range(20)])
    results.metric({"__name__": "http_server_errors_ratio", "service": CONSUMER}, flat(0.001))
    results.logs(PRODUCER, [(-3300 + i * 150, "", f"published order {7000 + i}") for i in range(20)])
    results.metric({"__name__": "http_server_errors_ratio", "service": PRODUCER}, flat(0.001))
    found = localise(results.items, [BROKER])
    assert (found.outcome, found.root, found.kind) == ("root_cause", CONSUMER, "data.poison_message")
    # The asked broker is affected through the client edge, whose record is one of its own session lines.
    assert [(e.caller, e.callee, e.via) for e in found.path] == [(BROKER, CONSUMER, "client")]
    assert "accepting AMQP connection" in found.path[0].refs[0].excerpt


def test_a_kafka_consumer_group_named_after_its_service_is_a_client_of_the_lag():
    results = Results()
    results.metric({"__name__": "kafka_consumergroup_lag", "service": BROKER, "consumergroup": CONSUMER,
                    "topic": "orders", "partition": "3"}, stepped(0, 4000, 40))
    results.logs(BROKER, [(-3400 + i * 150, "", f"[GroupCoordinator 1]: Stabilized group g{i} generation {i} with 3 members")
                          for i in range(20)])
    _services_book(results)
    found = localise(results.items, [BROKER])
    assert (found.outcome, found.reason) == ("undetermined", "dependency_not_examined")
    assert ("query_logs", {"service": CONSUMER}) in [(c.tool, c.arguments) for c in found.next_checks]


def test_a_server_s_own_request_queue_is_not_a_backlog_for_its_clients():
    """A queue of requests inside a server is drained by its own workers: its clients do not explain it."""
    results = Results()
    results.metric({"__name__": "executor_queued_tasks", "service": BROKER}, stepped(2, 400, 40))
    results.logs(BROKER, [(-3400 + i * 150, "", f"accepted connection from 10.244.12.5:{41000 + i}") for i in range(20)])
    _services_book(results)
    found = localise(results.items, [BROKER])
    assert found.root == BROKER and found.reason != "dependency_not_examined"
    assert not [e for e in found.graph.dependencies(BROKER) if e.via == "client"]


@pytest.mark.parametrize("line", [
    'failed to process message 88@3, redelivering (attempt 9) err="Unexpected token < in JSON at position 0"',
    "json: cannot unmarshal string into Go value of type main.Order",
    "invalid character '<' looking for beginning of value",
    "com.fasterxml.jackson.core.JsonParseException: Unexpected character ('<' (code 60))",
    "message 4471 requeued after handler error (attempt 30)",
])
def test_a_message_its_consumer_cannot_read_votes_for_a_poison_message(line):
    votes = word_votes(line, set())
    assert max(votes, key=votes.get) == "data.poison_message", votes
