"""FRTP (docs/spec/FRTP.md) in the conformance suite: SABUL's roles under a fixed-rate profile.
The codec (:mod:`.wire`), the profile SABUL's trace, relay and interop run take
(:mod:`.profile`, registered for protocol ``frtp`` on import) and FRTP's run on them
(:mod:`.interop`), the suite's own FRTP peer (:mod:`.peer`, driven by the SABUL driver), wire
rules on captures of both paths (:mod:`.checks`) and active probes (:mod:`.tester`)."""

from . import profile as profile
