"""The offer rule (:class:`elastic.front.mesos.offers.OfferBook`) without threads or network."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.front.mesos.offers import OfferBook, Wanting
from elastic.pool.state import AgentView


def agent(i: int, free: int, *, draining: bool = False, alloc: str | None = None) -> AgentView:
    return AgentView(f"a{i}/h/{i}", alloc or f"a{i}", "h", 4, free, draining, 500.0)


F1, F2 = Wanting("f1", "s1"), Wanting("f2", "s2")


def test_one_offer_per_agent_to_one_framework_taking_turns_own_stage_first() -> None:
    book = OfferBook("m")
    agents = [agent(1, 2), agent(2, 3), agent(3, 0), agent(4, 2, draining=True)]
    made = book.make(0.0, agents, [F1, F2], {"a2/h/2": 1}, {"a1": "s2", "a2": "*"})
    assert [(o.agent.name, o.framework_id, o.cores, o.stage) for o in made] == [
        ("a1/h/1", "f2", 2, "s2"),  # the allocation's own stage first
        ("a2/h/2", "f1", 2, "*"),  # then turns; 1 core held by a launched task not started yet
    ]
    assert book.make(1.0, agents, [F1, F2], {}, {}) == [], "one outstanding offer per agent"


def test_filters_refuse_as_many_cores_or_fewer_until_they_expire_and_revive_clears_them() -> None:
    book = OfferBook("m")
    (offer,) = book.make(0.0, [agent(1, 2)], [F1], {}, {})
    taken, errors = book.take("f1", [offer.offer_id])
    assert taken == [offer] and errors == []
    book.refuse("f1", offer.agent.name, 2, 5.0, now=0.0)
    assert book.make(1.0, [agent(1, 2)], [F1], {}, {}) == []
    assert [o.cores for o in book.make(1.0, [agent(1, 3)], [F1], {}, {})] == [3], "more cores: offered"
    book.take("f1", list(book.outstanding))
    book.refuse("f1", "a1/h/1", 3, 5.0, now=1.0)
    assert [o.framework_id for o in book.make(2.0, [agent(1, 3)], [F1, F2], {}, {})] == ["f2"]
    book.drop("f2")
    assert book.next_expiry(2.0) == 6.0
    assert book.make(6.0, [agent(1, 3)], [F1], {}, {}) != [], "the filter expired"
    book.drop("f1")
    book.refuse("f1", "a1/h/1", 3, 600.0, now=6.0)
    book.revive("f1")
    assert book.make(7.0, [agent(1, 3)], [F1], {}, {}) != []


def test_offers_end_when_the_agent_goes_drains_or_loses_the_cores_or_time_runs_out() -> None:
    book = OfferBook("m", offer_timeout=30.0)
    made = book.make(0.0, [agent(1, 2), agent(2, 2), agent(3, 2), agent(4, 2)], [F1], {}, {})
    assert len(made) == 4
    now = [agent(2, 2, draining=True), agent(3, 1), agent(4, 2)]
    assert sorted(o.agent.name for o in book.invalid(1.0, now, {})) == ["a1/h/1", "a2/h/2", "a3/h/3"]
    assert [o.agent.name for o in book.invalid(30.0, now, {})] == ["a4/h/4"]
    assert book.outstanding == {}


def test_taking_offers_names_each_one_that_is_not_valid() -> None:
    book = OfferBook("m")
    a, b = book.make(0.0, [agent(1, 2), agent(2, 2)], [F1], {}, {})
    valid, errors = book.take("f2", [a.offer_id])
    assert valid == [] and errors == [f"Offer {a.offer_id} was made to another framework"]
    valid, errors = book.take("f1", [a.offer_id, b.offer_id, "m-O99"])
    assert errors == [
        "Offer m-O99 is no longer valid",
        f"Offers {a.offer_id}, {b.offer_id} are on different agents",
    ]
    assert book.outstanding == {}, "every offer named is used up"


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.tuples(st.integers(0, 4), st.booleans()), min_size=5, max_size=5
            ),  # agents' free, draining
            st.dictionaries(st.integers(0, 4), st.integers(0, 3)),  # held
            st.sampled_from(["make", "take", "decline", "revive", "invalid"]),
            st.sampled_from(["f1", "f2"]),
        ),
        max_size=30,
    )
)
def test_never_more_than_one_offer_per_agent_nor_more_cores_than_it_has(steps: list[tuple]) -> None:
    book = OfferBook("m")
    filters: dict[tuple[str, str], tuple[int, float]] = {}
    for now, (state, held_by_index, op, fw) in enumerate(steps):
        agents = [agent(i, free, draining=d) for i, (free, d) in enumerate(state)]
        held = {agents[i].name: n for i, n in held_by_index.items()}
        if op == "make":
            for offer in book.make(float(now), agents, [Wanting(fw, "s")], held, {}):
                a = offer.agent
                assert 0 < offer.cores <= a.free - held.get(a.name, 0) and not a.draining
                refused = filters.get((fw, a.name))
                assert refused is None or now >= refused[1] or offer.cores > refused[0], (
                    "a filter was ignored"
                )
        elif op == "invalid":
            book.invalid(float(now), agents, held)
        elif op in ("take", "decline"):
            for offer in book.take(fw, [o for o, x in book.outstanding.items() if x.framework_id == fw])[0]:
                if op == "decline":
                    book.refuse(fw, offer.agent.name, offer.cores, 3.0, float(now))
                    filters[(fw, offer.agent.name)] = (offer.cores, now + 3.0)
        else:
            book.revive(fw)
            filters = {k: v for k, v in filters.items() if k[0] != fw}
        names = [o.agent.name for o in book.outstanding.values()]
        assert len(names) == len(set(names)), "two outstanding offers for one agent"
