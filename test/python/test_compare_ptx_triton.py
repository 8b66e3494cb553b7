"""bench/compare_ptx_triton.py (one kernel under Kiln and its Triton twin, ptxas' registers
and spills and PTX instruction counts side by side, without a GPU): on tutorial 01's vector
add, Kiln's column always, Triton's where triton is installed. Needs ptxas."""
import os
import re
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import compare_ptx_triton  # noqa: E402

PTXAS = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")


def test_vector_add_side_by_side(capsys, tmp_path):
    if not shutil.which(PTXAS) and not os.path.exists(PTXAS):
        pytest.skip("no ptxas")
    compare_ptx_triton.main([
        "kernel_sources:add_kernel", "--signature",
        '{"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "output_ptr": "*fp32:16", '
        '"n_elements": "i32"}', "--constexprs", '{"BLOCK_SIZE": 1024}', "--num-warps", "4",
        "--save", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    header = out[1].split()
    assert header[0] == "kiln"
    rows = {}
    for line in out[2:]:
        name, *cells = re.split(r"\s{2,}", line.strip())
        rows[name] = [int(c) for c in cells]
    assert 0 < rows["registers"][0] < 255
    assert rows["spill stores"][0] == rows["spill loads"][0] == 0
    # two loads and one store a vector
    assert rows["ld.global"][0] >= 2 and rows["st.global"][0] >= 1
    assert (tmp_path / "add_kernel.kiln.ptx").exists()
    if len(header) > 1:
        assert header[1] == "triton" and (tmp_path / "add_kernel.triton.ptx").exists()
        assert rows["ld.global"][1] >= 2
