import gc

from fasttune._support.gc_pause import paused_gc


class Node:
    def __init__(self) -> None:
        self.other: object = None


def test_the_collector_is_off_inside_and_on_again_after():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_as_a_decorator_and_when_the_block_raises():
    @paused_gc()
    def build() -> bool:
        raise ValueError(gc.isenabled())

    try:
        build()
    except ValueError as exc:
        assert exc.args == (False,)
    assert gc.isenabled()


def test_what_the_block_built_is_in_the_oldest_generation():
    with paused_gc():
        built = [Node() for _ in range(1000)]
    young = {id(o) for o in gc.get_objects(generation=0)}
    young |= {id(o) for o in gc.get_objects(generation=1)}
    assert not any(id(node) in young for node in built)
    assert any(o is built[0] for o in gc.get_objects(generation=2))


def test_objects_frozen_by_someone_else_stay_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            _ = [Node() for _ in range(10)]
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_cycle_built_inside_is_still_collected_later():
    collected = []

    class Watched(Node):
        def __del__(self) -> None:
            collected.append(True)

    with paused_gc():
        a, b = Watched(), Watched()
        a.other, b.other = b, a
        del a, b
    assert not collected
    gc.collect()
    assert len(collected) == 2
