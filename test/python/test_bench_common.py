"""bench/common.py's interleaved timing: the order of the calls from round to round (the H100
slows as it heats, so a fixed order would favour whatever is timed first)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import common  # noqa: E402


def _record(rounds, rotate):
    calls = []

    def timer(name):
        calls.append(name)
        return len(calls)

    times = common.interleaved_times({n: n for n in "abc"}, timer, rounds, rotate=rotate)
    return calls, times


def test_reversed_each_round():
    calls, times = _record(4, rotate=False)
    assert calls == list("abc" "cba" "abc" "cba")
    assert times == {"a": [1.0, 6.0, 7.0, 12.0], "b": [2.0, 5.0, 8.0, 11.0],
                     "c": [3.0, 4.0, 9.0, 10.0]}


def test_rotated_and_reversed():
    calls, _ = _record(4, rotate=True)
    # round r starts from call r (mod 3); odd rounds run backwards
    assert calls == list("abc" "acb" "cab" "cba")


def test_interleaved_sets_medians_and_rounds():
    row = {}
    common.interleaved(row, {"kiln": "k", "triton": "t", "peer": None},
                       lambda fn: {"k": 2.0, "t": 4.0}[fn], lambda ms: 1.0 / ms, rounds=3)
    assert row["kiln"] == 0.5 and row["triton"] == 0.25
    assert row["kiln_rounds"] == [0.5, 0.5, 0.5] and "peer" not in row


def test_matmul_pointer_rounds():
    # bench_matmul's pointer variant: Kiln, Triton's fastest and cuBLAS again in --rounds
    # interleaved rounds, each rate the median round's; --rounds 0 keeps the first timings.
    import types
    import bench_matmul
    ms = {"kiln": [1.0, 3.0, 2.0], "triton": [2.0, 2.0, 5.0], "cublas": [4.0, 1.0, 1.0]}
    seen = {name: iter(ts) for name, ts in ms.items()}
    bench = types.SimpleNamespace(args=types.SimpleNamespace(rounds=3),
                                  timer=lambda fn: next(seen[fn]))
    row = {"kiln": 0.0}
    bench_matmul.interleave(bench, row, {n: n for n in ms}, flop=4e9)
    # 4e9 flop in 2 ms: 2 TFLOP/s
    assert row["kiln"] == 2.0 and row["triton"] == 2.0 and row["cublas"] == 4.0
    assert row["kiln_rounds"] == "4.0 1.3 2.0"
    bench.args.rounds = 0
    row = {"kiln": 7.0}
    bench_matmul.interleave(bench, row, {n: n for n in ms}, flop=4e9)
    assert row == {"kiln": 7.0}
