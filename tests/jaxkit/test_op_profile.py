"""jaxkit.op_profile: product FLOPs read from HLO text (a hand-written module and a
compiled one, closed forms), and a traced profile of a small program."""

import jax
import jax.numpy as jnp
import pytest

from jaxkit import op_profile as P

HLO = """HloModule m, entry_computation_layout={(f32[8,4]{1,0}, f32[4,6]{1,0})->f32[8,6]{1,0}}

%fused_computation.1 (param_0.1: f32[8,4], param_1.2: f32[4,6]) -> f32[8,6] {
  %param_0.1 = f32[8,4]{1,0} parameter(0)
  %param_1.2 = f32[4,6]{1,0} parameter(1)
  %dot.3 = f32[8,6]{1,0} dot(%param_0.1, %param_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %multiply.4 = f32[8,6]{1,0} multiply(%dot.3, %dot.3)
}

%wrapper.2 (p.0: f32[8,4], p.1: f32[4,6]) -> f32[8,6] {
  %p.0 = f32[8,4]{1,0} parameter(0)
  %p.1 = f32[4,6]{1,0} parameter(1)
  ROOT %inner.5 = f32[8,6]{1,0} fusion(%p.0, %p.1), kind=kLoop, calls=%fused_computation.1
}

ENTRY %main.9 (Arg_0.1: f32[8,4], Arg_1.2: f32[4,6]) -> f32[8,6] {
  %Arg_0.1 = f32[8,4]{1,0} parameter(0)
  %Arg_1.2 = f32[4,6]{1,0} parameter(1)
  %ynn_fusion.7 = f32[8,6]{1,0} fusion(%Arg_0.1, %Arg_1.2), kind=kCustom, calls=%wrapper.2, metadata={op_name="jit(f)/dot_general"}
  %batched.8 = f32[3,8,6]{2,1,0} dot(%Arg_2.3, %Arg_3.4), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %Arg_2.3 = f32[3,8,5]{2,1,0} parameter(2)
  ROOT %tanh.6 = f32[8,6]{1,0} tanh(%ynn_fusion.7), metadata={op_name="jit(f)/tanh"}
}
"""  # noqa: E501 (HLO lines as XLA writes them)


def test_hlo_dot_flops_hand_written_module():
    info = P.hlo_dot_flops(HLO)
    # a dot two calls deep counts for the fusion that runs it: 2 * 8 * 6 * 4
    assert info["ynn_fusion.7"] == (2 * 8 * 6 * 4, (8, 6), "jit(f)/dot_general")
    assert info["dot.3"][0] == 2 * 8 * 6 * 4
    assert info["tanh.6"] == (0.0, (8, 6), "jit(f)/tanh")
    # the lhs's shape is read wherever it is defined in the computation
    assert info["batched.8"][0] == 2 * 3 * 8 * 6 * 5


def test_hlo_dot_flops_of_a_compiled_program_closed_form():
    m, k, n = 48, 32, 16
    f = jax.jit(lambda a, b, c: jnp.einsum("bij,bjk->bik", a, b).sum() + (a[0] @ c).sum())
    a, b, c = jnp.ones((3, m, k)), jnp.ones((3, k, n)), jnp.ones((k, n))
    info = P.hlo_dot_flops(f.lower(a, b, c).compile().as_text())
    flops = {fl for fl, _, _ in info.values()}
    assert 2 * 3 * m * k * n in flops  # the batched product
    assert 2 * m * k * n in flops  # the plain one


def test_op_profile_of_a_small_program():
    m, k, n = 128, 64, 96
    f = jax.jit(lambda x, w: jnp.tanh(x @ w) @ w.T)
    x, w = jnp.ones((m, k)), jnp.ones((k, n)) / k
    compiled = f.lower(x, w).compile()
    rows = P.op_profile(lambda: jax.block_until_ready(compiled(x, w)), compiled.as_text(),
                        n_calls=2)
    assert rows and all(r.seconds >= 0 for r in rows)
    assert [r.seconds for r in rows] == sorted((r.seconds for r in rows), reverse=True)
    s = P.summarize(rows)
    # both products ran and were traced: 2 m k n FLOPs each, per call
    assert s["product_gflop"] == pytest.approx(2 * 2 * m * k * n / 1e9)
    assert s["traced_s"] == pytest.approx(s["product_s"] + s["other_s"])
    assert s["product_s"] > 0 and s["product_gflops"] > 0
    table = P.summary_markdown(s)
    assert table.startswith("traced ") and "| operations |" in table


def test_op_profile_rejects_bad_call_count():
    with pytest.raises(ValueError, match="n_calls"):
        P.op_profile(lambda: None, HLO, n_calls=0)


def test_op_profile_keeps_a_trace_folder_it_is_given(tmp_path):
    f = jax.jit(lambda x: x @ x)
    x = jnp.ones((32, 32))
    compiled = f.lower(x).compile()
    rows = P.op_profile(lambda: jax.block_until_ready(compiled(x)), compiled.as_text(),
                        n_calls=1, trace_dir=tmp_path)
    assert sum(r.flops for r in rows) == 2 * 32 ** 3
    assert list(tmp_path.rglob("*.trace.json.gz"))
