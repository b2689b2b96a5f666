"""Each protocol's interop cases are one object each (:class:`udtconf.runner.InteropCase`), and
they are the test cases the registry and the adapter contract name for that protocol."""

from __future__ import annotations

from types import ModuleType

import pytest
from udtconf.frtp import cases as frtp
from udtconf.sabul import cases as sabul
from udtconf.udt import cases as udt
from udtharness.stacks import PROTOCOL_TESTCASES


@pytest.mark.parametrize(("protocol", "module"), [("udt", udt), ("sabul", sabul), ("frtp", frtp)])
def test_a_protocols_cases_are_the_testcases_its_registry_names(protocol: str, module: ModuleType) -> None:
    assert set(module.CASES) == set(PROTOCOL_TESTCASES[protocol])
    assert module.ALL_CASES == frozenset(PROTOCOL_TESTCASES[protocol])
    assert all(name == case.name for name, case in module.CASES.items())


def test_a_case_gives_mss_to_the_roles_it_sets_it_for_and_none_elsewhere() -> None:
    assert udt.CASES["mss"].mss == {"server": 1052, "client": 1280}
    assert udt.CASES["transfer"].mss == {}


def test_frtp_plays_sabuls_cases_but_mss() -> None:
    assert set(sabul.CASES) - set(frtp.CASES) == {"mss"}
    assert all(frtp.CASES[n] == sabul.CASES[n] for n in frtp.CASES)


def test_only_the_rendezvous_case_has_no_listening_server() -> None:
    assert udt.ALL_CASES - udt.LISTENER_CASES == {"rendezvous"}
