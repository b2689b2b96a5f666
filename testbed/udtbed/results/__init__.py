"""The results: what a run produced, as types and files, and everything that reads them back.
Results as dataclasses to and from JSON (``results``), bands judged over repeats (``repeats``),
live series to InfluxDB (``influx``), the HTML report and the index of all runs (``report``,
``runs_index``), their headless-Chromium checks (``screenshot``), two runs or two stacks side by
side and the performance gate of a change (``compare``, ``gate``). Above the emulation (a result
carries a host's watch), below the experiments: a report reads a run's results without any
experiment file, so an old run is drawn as it ran.
"""
