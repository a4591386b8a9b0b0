"""The identity memo: made once per (objects, values), a different object a miss even where it is equal, the oldest
result dropped past ``keep``."""

from clustersim.memo import IdentityMemo


def test_a_result_is_made_once_per_objects_and_values_and_the_oldest_goes_first():
    memo: IdentityMemo[int] = IdentityMemo(keep=2)
    made: list[str] = []
    a, b = [1], [1]  # equal, not the same object

    def make(tag: str) -> int:
        made.append(tag)
        return len(made)

    assert memo.get((a,), ("x",), lambda: make("a x")) == 1
    assert memo.get((a,), ("x",), lambda: make("again")) == 1  # kept
    assert memo.get((b,), ("x",), lambda: make("b x")) == 2  # another object: made for it
    assert memo.get((a,), ("y",), lambda: make("a y")) == 3  # another value
    assert len(memo) == 2 and made == ["a x", "b x", "a y"]
    assert memo.get((a,), ("x",), lambda: make("a x, dropped")) == 4  # the oldest was dropped past keep=2
    memo.clear()
    assert len(memo) == 0
