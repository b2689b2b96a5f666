"""The simulation: the papers' NS-2 figures in the deterministic simulator (``sim``, which runs
``udt-sim`` of impl/netsim over scenario files) and the simulator's TCP checked against NS-2
itself (``ns2check``). Beside the emulation at the bottom of udtbed's layers: it needs no
network, no stack and no experiment file, and imports none of the other layers.
"""
