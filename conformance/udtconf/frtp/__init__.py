"""FRTP (docs/spec/FRTP.md) in the conformance suite: SABUL's roles under a fixed-rate profile.
The codec (:mod:`.wire`), the suite's own FRTP peer (:mod:`.peer`, driven by the SABUL driver),
wire rules on captures of both paths (:mod:`.checks`) and active probes (:mod:`.tester`)."""
