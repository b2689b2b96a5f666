#!/usr/bin/env python3
"""Grafana dashboards as code: writes dashboards/udtbed.json from the panel list below.

The panels query the InfluxDB 1.x database ``udtbed`` the testbed runner writes to
(measurements ``throughput`` and ``short_tcp``, tagged run/experiment/part/stack/flow).
``testbed/tests/test_dashboards.py`` runs every panel's query against a live influxd filled
by a real run. Regenerate with ``python dashboards/generate.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

WHERE = '"run" =~ /^$run$/ AND "experiment" =~ /^$experiment$/ AND $timeFilter'

PANELS = [
    (
        "Throughput per flow (Mb/s, receiver)",
        "timeseries",
        f'SELECT mean("mbps") FROM "throughput" WHERE {WHERE} GROUP BY time($__interval), "stack", "part", "flow" fill(null)',
    ),
    (
        "Aggregate throughput per stack (Mb/s)",
        "timeseries",
        f'SELECT sum("mbps") FROM (SELECT mean("mbps") AS "mbps" FROM "throughput" WHERE {WHERE} '
        'GROUP BY time(1s), "stack", "part", "flow") WHERE $timeFilter GROUP BY time(1s), "stack", "part" fill(none)',
    ),
    (
        "Bytes received per flow",
        "timeseries",
        f'SELECT max("bytes") FROM "throughput" WHERE {WHERE} GROUP BY time($__interval), "stack", "part", "flow" fill(previous)',
    ),
    (
        "Short 1 MB TCP flows: aggregate vs bulk flows (Fig. 13)",
        "table",
        f'SELECT last("aggregate_mbps") AS "aggregate_mbps", last("flows") AS "flows" FROM "short_tcp" WHERE {WHERE} '
        'GROUP BY "stack", "bulk_flows"',
    ),
]

VARIABLES = [
    ("run", 'SHOW TAG VALUES FROM "throughput" WITH KEY = "run"'),
    ("experiment", 'SHOW TAG VALUES FROM "throughput" WITH KEY = "experiment"'),
]


def dashboard() -> dict:
    ds = {"type": "influxdb", "uid": "udtbed"}
    panels = []
    for i, (title, kind, q) in enumerate(PANELS):
        panels.append(
            {
                "id": i + 1,
                "title": title,
                "type": kind,
                "datasource": ds,
                "gridPos": {"x": (i % 2) * 12, "y": (i // 2) * 9, "w": 12, "h": 9},
                "targets": [
                    {
                        "refId": "A",
                        "datasource": ds,
                        "rawQuery": True,
                        "resultFormat": "time_series" if kind != "table" else "table",
                        "query": q,
                    }
                ],
                "fieldConfig": {"defaults": {"unit": "Mbits" if "Mb/s" in title else "decbytes"}, "overrides": []},
            }
        )
    return {
        "title": "UDT testbed",
        "uid": "udtbed",
        "schemaVersion": 38,
        "version": 1,
        "refresh": "5s",
        "time": {"from": "now-30m", "to": "now"},
        "tags": ["udt", "testbed"],
        "templating": {
            "list": [
                {
                    "name": n,
                    "type": "query",
                    "datasource": ds,
                    "query": q,
                    "refresh": 2,
                    "includeAll": True,
                    "multi": True,
                    "current": {"text": "All", "value": "$__all"},
                }
                for n, q in VARIABLES
            ]
        },
        "panels": panels,
    }


def main() -> None:
    out = Path(__file__).with_name("udtbed.json")
    out.write_text(json.dumps(dashboard(), indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
