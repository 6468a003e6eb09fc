"""Mining one service at a time gives what mining every line in time order gives (the long way, kept
here): the same templates, in the same order, each with the same records in the same order."""

import operator

from hypothesis import given, settings
from hypothesis import strategies as st
from drain3 import TemplateMiner

from diagnosis.localisation.records import LogRecord, ref_of
from diagnosis.localisation.templates import _SEVERITY, Masker, Template, _config, mine, zeroed

MESSAGES = st.sampled_from([
    "GET /v1/items/{n} 200 in {n} ms", "cache refresh finished in {n} ms", "user {n} signed in",
    "call to http://db-{n}:5432/v1 failed: connection refused", "job {n} done", "worker w{n} finished job {n}",
    "connect to 10.0.{n}.7:6379 timed out", "ready",
])
RECORDS = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["INFO", "WARN", "ERROR"]),
                             st.integers(0, 20), MESSAGES, st.integers(0, 999)), max_size=60)


def _long_way(records):
    miners, seen, templates, masker, by_shape = {}, {}, {}, Masker(), {}
    for record in sorted(records, key=operator.attrgetter("ts")):
        shape = zeroed(record.message)
        template = by_shape.get((record.service, record.level, shape))
        if template is None:
            line, same = masker(record.message, shape)
            text = f"{record.level} {line}"
            template = seen.get((record.service, text))
            if template is None:
                if record.service not in miners:
                    miners[record.service] = TemplateMiner(config=_config())
                key = (record.service, int(miners[record.service].add_log_message(text)["cluster_id"]))
                if key not in templates:
                    templates[key] = Template(record.service, record.level, "")
                template = seen[(record.service, text)] = templates[key]
            if same:
                by_shape[(record.service, record.level, shape)] = template
        template.records.append(record)
        template.shapes.append(shape)
    for (service, cluster_id), template in templates.items():
        cluster = next(c for c in miners[service].drain.clusters if c.cluster_id == cluster_id)
        template.text = cluster.get_template().split(" ", 1)[-1]
        template.level = max({r.level for r in template.records}, key=_SEVERITY.index)
    return templates


def _records(rows):
    return [LogRecord(ref_of("inv", "query_logs", f"$.records[{i}].message", message.format(n=n)), float(ts), service,
                      level, message.format(n=n)) for i, (service, level, ts, message, n) in enumerate(rows)]


@settings(max_examples=200, deadline=None)
@given(RECORDS)
def test_mining_a_service_at_a_time_gives_what_mining_all_lines_in_time_order_gives(rows):
    quick, slow = mine(_records(rows)), _long_way(_records(rows))
    assert [(key, t.level, t.text, [r.ref for r in t.records], t.shapes) for key, t in quick.items()] == \
           [(key, t.level, t.text, [r.ref for r in t.records], t.shapes) for key, t in slow.items()]
