"""Hostile input to ``submit`` only ever yields ``Admitted`` or one of the closed errors."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemojex.domain.errors import Reason
from codemojex.service import Admitted, Services, submit
from tests.codemojex.game import PRICE, books, make_player, make_round

JUNK = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.binary(max_size=300),
    st.text(max_size=300),
    st.text(alphabet=st.characters(codec=None, categories=["Cs", "Cc", "So", "Zs"]), max_size=50),
    st.lists(st.text(max_size=8), max_size=10),
    st.builds(lambda n: "🍕" * n, st.integers(0, 5000)),  # huge strings
    st.just(b"\xff\xfe\xc3\x28 \xf0\x28\x8c\xbc"),  # invalid UTF-8
    st.just("RND" + "\x00" * 3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
)
VALID_GUESSES = st.sampled_from(["🍕🍩🚀⚽🎸❤️", "😀 😎 🤖 👻 🐱 🐶", "🇫🇷,👩‍💻,1️⃣,👍🏽,🦊,🐸"])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
async def test_any_input_yields_only_closed_errors(services: Services, data: st.DataObject) -> None:
    rich = await make_player(services.pool, PRICE * 1000)
    poor = await make_player(services.pool, 0)
    rid = await make_round(services.pool)
    round_id = data.draw(st.one_of(st.just(rid), st.just("RND" + rid[3:][::-1]), JUNK), label="round")
    player = data.draw(st.one_of(st.sampled_from([rich, poor, "someone-else"]), JUNK), label="player")
    guess = data.draw(st.one_of(VALID_GUESSES, JUNK), label="guess")
    before = await books(services)
    out = await submit(services, round_id, player, guess)
    after = await books(services)
    if isinstance(out, Admitted):
        assert (round_id, player) == (rid, rich)
        assert after.guesses == before.guesses + 1 and after.jobs == before.jobs + 1
    else:
        assert isinstance(out, Reason)
        assert after == before
        if round_id != rid:
            assert out is Reason.NO_ROUND
