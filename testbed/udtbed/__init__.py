"""UDT testbed: emulated WAN topologies, experiments, reports (issue 3)."""
