"""Copy-ins of resident buffers (codegen/staging.py ``resident_copies_in``): a thread's
loads all issue before its stores to shared memory, and a full block of a batch copies
each array's contiguous range of its elements in 16-byte vectors -- exact in full and
partial blocks alike (copy-outs too)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from polygpu.codegen import staging
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

CHAIN = "kernels/map_chain.c"
INPUTS = ("A", "B", "c", "D", "E")

HALF = """
void half(int n, float x[n][8], float w[n][4], float y[n][4]) {
#pragma scop
  for (int e = 0; e < n; e++)
    for (int i = 0; i < 4; i++)
      y[e][i] = x[e][i] * w[e][i] + x[e][5];
  for (int e = 0; e < n; e++)
    for (int i = 0; i < 4; i++)
      y[e][i] = y[e][i] * x[e][1];
#pragma endscop
}
"""


def _chain(params):
    prepared = prepare(CHAIN, params=params)
    fused = next(k for k, tr in enumerate(prepared.candidates)
                 if tr.host is not None and tr.host.kind == "fused batch")
    # the default's plan at 2^22 instances: 8-thread groups, 32 elements a block
    variant = Variant(candidate=fused, tile=(5, 8), threads=(1, 8), shared=False,
                      device_steps=True, resident=True, specialize=True,
                      elements_per_block=32)
    return prepared, compile_variant(prepared, variant, params)


@pytest.mark.parametrize("ni", [37, 69])
def test_the_chain_is_exact_in_full_and_partial_blocks(ni):
    """69 instances: two full blocks (vectors) and one of 5 elements (word by word)."""
    params = {"ni": ni}
    prepared, compiled = _chain(params)
    source = compiled.program.source
    for name in INPUTS:
        assert f"reinterpret_cast<const float4 *>(&{name}[pg_res_{name}_in_start])" \
            in source
    assert "reinterpret_cast<float4 *>(&F[pg_res_F_out_start])" in source
    result = check_program(compiled.program, prepared.source_scop, CHAIN, params,
                           backend="cpu", seed=3)
    assert result.ok, result.message


def test_a_partly_read_element_is_copied_word_by_word(tmp_path):
    """``x``'s elements are read at 0..3 and 5 of 8 words: no contiguous range, so no
    vectors for it (``w`` and ``y`` are whole rows: vectors); exact either way."""
    src = tmp_path / "half.c"
    src.write_text(HALF)
    params = {"n": 131}
    prepared = prepare(str(src), params=params)
    variant = Variant(candidate=2, tile=(4,), threads=(4,), shared=False,
                      device_steps=True, resident=True, specialize=True,
                      elements_per_block=64)
    compiled = compile_variant(prepared, variant, params)
    source = compiled.program.source
    assert "pg_res_x_vec" not in source and "pg_res_x_in[" in source
    assert "pg_res_w_vec" in source
    result = check_program(compiled.program, prepared.source_scop, str(src), params,
                           backend="cpu", seed=4)
    assert result.ok, result.message


def _ptx(source: str, tmp_path) -> str:
    cu, ptx = tmp_path / "k.cu", tmp_path / "k.ptx"
    cu.write_text(source)
    subprocess.run(["nvcc", "-arch=sm_90", "-O3", "-ptx", str(cu), "-o", str(ptx)],
                   check=True, capture_output=True)
    return ptx.read_text()


def _order(ptx: str, load: str, store: str) -> tuple[int, int]:
    """Line numbers of the last ``load`` and the first ``store`` instruction."""
    lines = ptx.splitlines()
    loads = [k for k, line in enumerate(lines) if re.search(load, line)]
    stores = [k for k, line in enumerate(lines) if re.search(store, line)]
    assert loads and stores
    return loads[-1], stores[0]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_load_of_a_copy_in_issues_before_its_first_store(tmp_path, monkeypatch):
    """In nvcc's PTX of the chain's kernel, word by word: every global load comes before
    the first shared store (a thread's 13 words in flight at once); the one-loop copy
    (``BATCHED_COPY_BYTES = 0``) stores each word before the next load.  In vectors: five
    16-byte loads, one an input, before the first 16-byte shared store."""
    params = {"ni": 1 << 22}
    monkeypatch.setattr(staging, "BLOCK_RANGES", False)
    last_load, first_store = _order(_ptx(_chain(params)[1].program.source, tmp_path),
                                    r"ld\.global", r"st\.shared")
    assert last_load < first_store
    monkeypatch.setattr(staging, "BATCHED_COPY_BYTES", 0)
    last_load, first_store = _order(_ptx(_chain(params)[1].program.source, tmp_path),
                                    r"ld\.global", r"st\.shared")
    assert first_store < last_load
    monkeypatch.undo()
    ptx = _ptx(_chain(params)[1].program.source, tmp_path)
    assert len(re.findall(r"ld\.global\.nc\.v4\.f32", ptx)) == len(INPUTS)
    last_load, first_store = _order(ptx, r"ld\.global\.nc\.v4", r"st\.shared\.v4")
    assert last_load < first_store
