"""Constraint matching, the pool key and executor labels: the pure rules of executor pools."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hades.core.constraints import (
    Constraint,
    LabelError,
    Placement,
    Resources,
    fits,
    parse_labels,
    placement_of,
    satisfies,
)

KEYS = ("os", "arch", "pool", "tools")
VALUES = ("linux", "windows", "a", "b", "java", "node", "")


def reference(constraint: Constraint, labels: dict[str, str]) -> bool:
    """The rules as the docs state them, written out separately from the matcher."""
    name = constraint.attribute.removeprefix("${attr.").removesuffix("}")
    have = labels.get(name)
    if constraint.operator in ("=", "=="):
        return have is not None and have == constraint.value
    if constraint.operator == "!=":
        return have is None or have != constraint.value
    if have is None:
        return False
    if constraint.operator == "regexp":
        return re.search(constraint.value, have) is not None
    wanted = {item.strip() for item in constraint.value.split(",")} - {""}
    return wanted.issubset({item.strip() for item in have.split(",")})


constraints = st.builds(
    Constraint,
    attribute=st.sampled_from(KEYS).flatmap(lambda k: st.sampled_from((k, "${attr." + k + "}"))),
    operator=st.sampled_from(("=", "==", "!=", "regexp", "set_contains")),
    value=st.one_of(
        st.sampled_from(VALUES),
        st.lists(st.sampled_from(VALUES[:-1]), min_size=1, max_size=3).map(",".join),
        st.sampled_from(("^lin", "ows$", "a|b", "j.v")),
    ),
).filter(lambda c: c.operator != "set_contains" or any(v.strip() for v in c.value.split(",")))
label_sets = st.dictionaries(
    st.sampled_from(KEYS),
    st.one_of(st.sampled_from(VALUES), st.lists(st.sampled_from(VALUES[:-1]), max_size=3).map(",".join)),
)


@given(st.lists(constraints, max_size=4), label_sets)
def test_the_matcher_agrees_with_the_reference_predicate(wanted: list[Constraint], labels: dict[str, str]) -> None:
    placement = placement_of(tuple(wanted), None)
    assert satisfies(placement, labels) == all(reference(c, labels) for c in wanted)


@given(st.lists(constraints, max_size=4), st.randoms())
def test_the_pool_key_ignores_order_repeats_and_spelling(wanted: list[Constraint], rnd: object) -> None:
    shuffled = list(wanted) * 2
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    first, second = placement_of(tuple(wanted), None), placement_of(tuple(shuffled), None)
    assert (first.key if first else None) == (second.key if second else None)


def test_equal_requirements_share_a_pool_and_different_ones_do_not() -> None:
    linux = placement_of((Constraint(attribute="os", value="linux"),), None)
    spelled = placement_of((Constraint(attribute="${attr.kernel.name}", operator="==", value="linux"),), None)
    windows = placement_of((Constraint(attribute="os", value="windows"),), None)
    assert linux is not None and spelled is not None and windows is not None
    assert linux.key == spelled.key != windows.key
    assert re.fullmatch(r"[0-9a-f]{12}", linux.key)


def test_a_job_without_requirements_has_no_pool_and_runs_anywhere() -> None:
    assert placement_of((), None) is None
    assert placement_of((), Resources()) is None
    assert satisfies(None, {})


def test_resources_need_at_least_that_much_advertised() -> None:
    placement = placement_of((), Resources(cpu=2, memory="2g"))
    assert placement == Placement(cpu=2.0, memory=2 * 1024**3)
    assert satisfies(placement, {"cpu": "4", "memory": "4096m"})
    assert satisfies(placement, {"cpu": "2", "memory": str(2 * 1024**3)})
    assert not satisfies(placement, {"cpu": "1", "memory": "4g"})
    assert not satisfies(placement, {"cpu": "4", "memory": "1g"})
    assert not satisfies(placement, {"cpu": "4"})  # memory not advertised: cannot take it
    assert not satisfies(placement, {"cpu": "many", "memory": "4g"})


def test_a_placement_describes_itself_in_the_reason() -> None:
    placement = placement_of(
        (
            Constraint(attribute="os", value="windows"),
            Constraint(attribute="arch", operator="!=", value="arm64"),
            Constraint(attribute="host", operator="regexp", value="^build-"),
            Constraint(attribute="tools", operator="set_contains", value="node, java"),
        ),
        Resources(cpu=4, memory="512m"),
    )
    assert placement is not None
    assert placement.describe() == (
        "arch!=arm64, host matching ^build-, os=windows, tools containing java,node, cpu>=4, memory>=512m"
    )


def test_labels_parse_with_lists_and_refuse_junk() -> None:
    assert parse_labels("") == {}
    assert parse_labels(" os=linux , pool=gpu,tools=java,node ,arch=amd64") == {
        "os": "linux",
        "pool": "gpu",
        "tools": "java,node",
        "arch": "amd64",
    }
    for junk in ("linux", "=x", "o s=linux"):
        with pytest.raises(LabelError, match="is not key=value"):
            parse_labels(junk)


def test_what_running_attempts_reserved_is_taken_off_the_capacity() -> None:
    labels = {"cpu": "4", "memory": "8g"}
    two_cores = placement_of((), Resources(cpu=2, memory="3g"))
    assert two_cores is not None
    assert fits(two_cores, labels, []) and fits(two_cores, labels, [two_cores])
    assert not fits(two_cores, labels, [two_cores, two_cores])
    memory_only = placement_of((), Resources(memory="3g"))
    assert not fits(memory_only, labels, [two_cores, memory_only])  # 9g of 8g
    assert fits(None, labels, [two_cores, two_cores]) and fits(placement_of((), None), {}, [two_cores])
