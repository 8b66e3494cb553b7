"""bench/attention_timeline.py without a GPU: its timed forward compiles for sm_90a with the
library's walk intact (TMA rings and store, the three clock reads where the source has them),
and the timeline arithmetic over synthetic programs."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import attention_timeline as at  # noqa: E402
import kiln  # noqa: E402


def test_timed_forward_compiles():
    bm, bn, nw, ns = at.fa.descriptor_tile_config(128)
    sig = {name: f"tensordesc<fp16[{rows}, 128]>"
           for name, rows in (("desc_q", bm), ("desc_k", bn), ("desc_v", bn), ("desc_o", bm))}
    sig.update(T="*i64:16", sm_scale="fp32", N_CTX="i32:16")
    ptx = kiln.compile(at.attn_fwd_timed, signature=sig,
                       constexprs=dict(HEAD_DIM=128, BLOCK_M=bm, BLOCK_N=bn), target="sm_90a",
                       num_warps=nw, num_stages=ns).asm["ptx"]
    assert ptx.count("%globaltimer") == 3 and ptx.count("%smid") == 1
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx  # K, V through the TMA
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx  # O through the TMA
    # entry read first, the output's read after the TMA store's wait
    assert ptx.index("%globaltimer") < ptx.index("wgmma.mma_async")
    assert ptx.rindex("%globaltimer") > ptx.index("cp.async.bulk.wait_group.read 0")


def test_timeline_per_sm():
    # (entry, loop end, output stored, sm) in ns: SM 0 runs two programs, SM 1 one.
    rows = [(0, 10_000, 11_000, 0), (11_500, 21_500, 22_500, 0), (100, 10_100, 11_100, 1)]
    t = at.timeline(rows)
    assert t["body"] == [10.0, 10.0, 10.0]
    assert t["output"] == [1.0, 1.0, 1.0]
    assert t["gap"] == [0.5]
    assert sorted(t["tail"]) == [0.0, 11.4]
    assert t["span_ms"] == pytest.approx(0.0225) and t["sms"] == 2
    assert at.quartiles([3.0]) == (3.0, 3.0, 3.0)
