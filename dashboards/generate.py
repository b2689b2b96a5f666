#!/usr/bin/env python3
"""Grafana dashboards as code, with Grafana's own SDK (grafana-foundation-sdk): writes
dashboards/udtbed.json.

The panels query the InfluxDB 1.x database ``udtbed`` that the testbed runner
(``udtbed.experiments.live``) and the conformance suite (``udtconf.influx_results``) write to; the
measurements and tags are listed in docs/testbed/influx-grafana.md, "InfluxDB and Grafana".
``testbed/tests/test_dashboards.py`` runs every query against a live influxd filled by a real
run and checks that the committed JSON is this script's output. Regenerate with
``make dashboards``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import stat, table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh, VariableSort

OUT = Path(__file__).with_name("udtbed.json")
DS = DataSourceRef(type_val="influxdb", uid="udtbed")
RUN = '"run" =~ /^$run$/ AND "experiment" =~ /^$experiment$/'
WHERE = f'{RUN} AND "stack" =~ /^$stack$/ AND $timeFilter'
PER_FLOW = 'GROUP BY time($__interval), "stack", "part", "flow" fill(null)'
PER_LINK = 'GROUP BY time($__interval), "stack", "part", "link", "direction" fill(null)'


class InfluxQL(cogvariants.Dataquery):
    """An InfluxQL query of Grafana's InfluxDB data source (the SDK has no InfluxDB model)."""

    def __init__(self, query: str, ref_id: str, result_format: Literal["time_series", "table"], alias: str) -> None:
        self.query, self.ref_id, self.result_format, self.alias = query, ref_id, result_format, alias

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"refId": self.ref_id, "datasource": DS, "rawQuery": True}
        out |= {"resultFormat": self.result_format, "query": self.query}
        return out | ({"alias": self.alias} if self.alias else {})


class InfluxQLQuery(cogbuilder.Builder[InfluxQL]):
    def __init__(self, query: str, ref_id: str = "A", result_format: Literal["time_series", "table"] = "time_series"):
        self._internal = InfluxQL(query, ref_id, result_format, "")

    def alias(self, alias: str) -> InfluxQLQuery:
        """Series name in the legend: ``$tag_flow``, ``$col`` (Grafana's InfluxQL alias patterns)."""
        self._internal.alias = alias
        return self

    def build(self) -> InfluxQL:
        return self._internal


def series(title: str, unit: str, *queries: InfluxQLQuery, description: str = "") -> timeseries.Panel:
    p = timeseries.Panel().title(title).datasource(DS).unit(unit).span(12).height(8)
    p = p.description(description) if description else p
    p = p.legend(common_b.VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.LIST))
    for q in queries:
        p = p.with_target(q)
    return p


def grid(title: str, query: InfluxQLQuery, span: int = 12) -> table.Panel:
    return table.Panel().title(title).datasource(DS).with_target(query).span(span).height(8)


def variable(name: str, query: str) -> dash.QueryVariable:
    return (
        dash.QueryVariable(name)
        .datasource(DS)
        .query(query)
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_DESC if name == "run" else VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
    )


def dashboard() -> dash.Dashboard:
    per_flow = "$tag_stack $tag_part $tag_flow"
    per_link = "$tag_stack $tag_part $tag_link $tag_direction"
    return (
        dash.Dashboard("UDT testbed")
        .uid("udtbed")
        .tags(["udt", "testbed"])
        .refresh("5s")
        .time("now-30m", "now")
        .with_variable(variable("run", 'SHOW TAG VALUES FROM "throughput" WITH KEY = "run"'))
        .with_variable(
            variable("experiment", 'SHOW TAG VALUES FROM "throughput" WITH KEY = "experiment" WHERE "run" =~ /^$run$/')
        )
        .with_variable(variable("stack", f'SHOW TAG VALUES FROM "throughput" WITH KEY = "stack" WHERE {RUN}'))
        .with_row(dash.Row("Flows"))
        .with_panel(
            series(
                "Throughput per flow (Mb/s, receiver)",
                "Mbits",
                InfluxQLQuery(f'SELECT mean("mbps") FROM "throughput" WHERE {WHERE} {PER_FLOW}').alias(per_flow),
            )
        )
        .with_panel(
            series(
                "Aggregate throughput per stack (Mb/s)",
                "Mbits",
                InfluxQLQuery(
                    f'SELECT sum("mbps") FROM (SELECT mean("mbps") AS "mbps" FROM "throughput" WHERE {WHERE} '
                    'GROUP BY time(1s), "stack", "part", "flow") WHERE $timeFilter '
                    'GROUP BY time(1s), "stack", "part" fill(none)'
                ).alias("$tag_stack $tag_part"),
            )
        )
        .with_panel(
            series(
                "Bytes received per flow",
                "decbytes",
                InfluxQLQuery(
                    f'SELECT max("bytes") FROM "throughput" WHERE {WHERE} GROUP BY time($__interval), "stack", '
                    '"part", "flow" fill(previous)'
                ).alias(per_flow),
            )
        )
        .with_panel(
            grid(
                "Short 1 MB TCP flows: aggregate vs bulk flows (Fig. 13)",
                InfluxQLQuery(
                    f'SELECT last("aggregate_mbps") AS "aggregate_mbps", last("flows") AS "flows" FROM "short_tcp" '
                    f'WHERE {WHERE} GROUP BY "stack", "bulk_flows"',
                    result_format="table",
                ),
            )
        )
        .with_row(dash.Row("UDT senders and receivers"))
        .with_panel(
            series(
                "RTT (ms, sender's smoothed)",
                "ms",
                InfluxQLQuery(f'SELECT mean("rtt_ms") FROM "sender" WHERE {WHERE} {PER_FLOW}').alias(per_flow),
            )
        )
        .with_panel(
            series(
                "Flow window and congestion window (packets)",
                "short",
                InfluxQLQuery(f'SELECT mean("flow_window") FROM "sender" WHERE {WHERE} {PER_FLOW}').alias(
                    f"flow window {per_flow}"
                ),
                InfluxQLQuery(f'SELECT mean("cwnd") FROM "sender" WHERE {WHERE} {PER_FLOW}', ref_id="B").alias(
                    f"cwnd {per_flow}"
                ),
            )
        )
        .with_panel(
            series(
                "Sending period (µs between packets)",
                "µs",
                InfluxQLQuery(f'SELECT mean("period_us") FROM "sender" WHERE {WHERE} {PER_FLOW}').alias(per_flow),
                description="The sender's pacing: 1500-byte packets every period_us is 12000/period_us Mb/s.",
            )
        )
        .with_panel(
            series(
                "Losses, retransmissions and NAKs per second",
                "pps",
                InfluxQLQuery(
                    'SELECT mean("losses_per_s") AS "losses", mean("retrans_per_s") AS "retrans", '
                    f'mean("naks_recv_per_s") AS "NAKs received" FROM "sender" WHERE {WHERE} {PER_FLOW}'
                ).alias(f"sender $col {per_flow}"),
                InfluxQLQuery(
                    'SELECT mean("losses_per_s") AS "losses", mean("naks_sent_per_s") AS "NAKs sent" '
                    f'FROM "receiver" WHERE {WHERE} {PER_FLOW}',
                    ref_id="B",
                ).alias(f"receiver $col {per_flow}"),
            )
        )
        .with_row(dash.Row("Emulated links (udt-linkem)"))
        .with_panel(
            series(
                "Emulator queue depth per link and direction (frames)",
                "short",
                InfluxQLQuery(f'SELECT mean("queue_frames") FROM "link" WHERE {WHERE} {PER_LINK}').alias(
                    f"queued {per_link}"
                ),
                InfluxQLQuery(f'SELECT mean("in_flight") FROM "link" WHERE {WHERE} {PER_LINK}', ref_id="B").alias(
                    f"in flight {per_link}"
                ),
            )
        )
        .with_panel(
            series(
                "Emulator drops per second per link and direction",
                "pps",
                InfluxQLQuery(
                    'SELECT mean("dropped_queue_per_s") AS "queue full", mean("dropped_loss_per_s") AS "loss model" '
                    f'FROM "link" WHERE {WHERE} {PER_LINK}'
                ).alias(f"$col {per_link}"),
            )
        )
        .with_panel(
            series(
                "Emulator queue delay (µs, mean per second)",
                "µs",
                InfluxQLQuery(f'SELECT mean("queue_delay_avg_us") FROM "link" WHERE {WHERE} {PER_LINK}').alias(
                    per_link
                ),
            )
        )
        .with_panel(
            series(
                "Emulator output (Mb/s) and bunched frames per second",
                "short",
                InfluxQLQuery(f'SELECT mean("mbps_out") FROM "link" WHERE {WHERE} {PER_LINK}').alias(
                    f"Mb/s {per_link}"
                ),
                InfluxQLQuery(f'SELECT mean("bunched_per_s") FROM "link" WHERE {WHERE} {PER_LINK}', ref_id="B").alias(
                    f"bunched/s {per_link}"
                ),
                description="Bunched: frames released less than half their spacing after the previous one "
                "(docs/link-emulation.md); the runner flags parts where too many were.",
            )
        )
        .with_row(dash.Row("Calibration and conformance"))
        .with_panel(
            grid(
                "Calibration: measured vs wanted RTT and rate per path",
                InfluxQLQuery(
                    'SELECT last("rtt_ms") AS "RTT ms", last("expected_rtt_ms") AS "want RTT ms", '
                    'last("rate_mbps") AS "rate Mb/s", last("expected_rate_mbps") AS "want rate Mb/s", '
                    f'last("ok") AS "ok" FROM "calibration" WHERE {RUN} AND $timeFilter '
                    'GROUP BY "run", "experiment", "part", "src", "dst"',
                    result_format="table",
                ),
            )
        )
        .with_panel(
            stat.Panel()
            .title("Conformance: share of cases passed per stack pair (%)")
            .datasource(DS)
            .unit("percent")
            .span(12)
            .height(8)
            .with_target(
                InfluxQLQuery(
                    'SELECT mean("passed") * 100 FROM "conformance" WHERE $timeFilter GROUP BY "server", "client"'
                ).alias("$tag_server × $tag_client")
            )
        )
        .with_panel(
            grid(
                "Conformance: outcome by stack pair and case, per run",
                InfluxQLQuery(
                    'SELECT last("passed") AS "passed", last("duration_s") AS "seconds" FROM "conformance" '
                    'WHERE $timeFilter GROUP BY "run", "server", "client", "kind", "case", "outcome"',
                    result_format="table",
                ),
                span=24,
            )
        )
    )


def as_json() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (what udtbed.json holds)."""
    d = dashboard().build()
    model: dict[str, Any] = json.loads(json.dumps(d, cls=JSONEncoder))
    for i, panel in enumerate(model.get("panels") or []):
        panel["id"] = i + 1  # stable ids: links to a panel (viewPanel=N) survive a regeneration
    return model


def queries(model: dict[str, Any]) -> list[str]:
    """Every InfluxQL query of ``model``: each panel's targets, then the template variables."""
    panels = [t["query"] for p in model["panels"] for t in p.get("targets", [])]
    return panels + [v["query"] for v in model["templating"]["list"]]


def main() -> None:
    OUT.write_text(json.dumps(as_json(), indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
