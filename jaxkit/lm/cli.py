"""``jaxkit lm``: the local language model from the shell (generate, chat, serve, and
record-activations: its residual stream into an activation store)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from jaxkit._cli_common import err_console
from jaxkit._cli_common import fail as _fail

lm_app = typer.Typer(help="jaxkit.lm: a local language model (SmolLM2-135M-Instruct by "
                          "default): generate, chat, serve an OpenAI-compatible endpoint.",
                     no_args_is_help=True)

ModelOpt = Annotated[str, typer.Option(
    help="'smollm2-135m', a .gguf file or a safetensors folder")]
DtypeOpt = Annotated[str, typer.Option(help="weights: float32 or bfloat16")]


def _load(model: str, dtype: str):
    from jaxkit.lm import LMError
    from jaxkit.lm.local_chat import load_model

    if dtype not in ("float32", "bfloat16"):
        _fail(f"--dtype must be float32 or bfloat16; got {dtype!r}")
    try:
        return load_model(model, dtype)
    except LMError as e:
        _fail(str(e))


def _check_sampling(max_tokens: int, temperature: float, top_p: float) -> None:
    if max_tokens < 1:
        _fail(f"--max-tokens must be >= 1; got {max_tokens}")
    if not temperature >= 0:
        _fail(f"--temperature must be >= 0; got {temperature}")
    if not 0 < top_p <= 1:
        _fail(f"--top-p must be in (0, 1]; got {top_p}")


@lm_app.command("generate")
def generate_cmd(
    prompt: Annotated[str, typer.Argument(help="the text to continue")],
    max_tokens: Annotated[int, typer.Option(help="the most new tokens")] = 64,
    temperature: Annotated[float, typer.Option(help="0: greedy")] = 0.0,
    top_p: Annotated[float, typer.Option(help="nucleus sampling's mass")] = 1.0,
    seed: Annotated[int, typer.Option(help="the PRNG seed (with --temperature > 0)")] = 0,
    stop: Annotated[list[str] | None, typer.Option(
        help="stop at this string (repeatable)")] = None,
    model: ModelOpt = "smollm2-135m",
    dtype: DtypeOpt = "float32",
):
    """Continue PROMPT (plain text, no chat template) and print the completion."""
    import jax

    _check_sampling(max_tokens, temperature, top_p)
    lm = _load(model, dtype)
    try:
        gen = lm.generate(prompt, key=jax.random.key(seed), max_new_tokens=max_tokens,
                          temperature=temperature, top_p=top_p, stop=list(stop or ()))
    except ValueError as e:
        _fail(str(e))
    typer.echo(gen.texts[0])


@lm_app.command("chat")
def chat_cmd(
    message: Annotated[str | None, typer.Option(
        help="one user turn: print the reply and exit (default: a conversation on stdin)")]
    = None,
    system: Annotated[str | None, typer.Option(help="the system prompt")] = None,
    max_tokens: Annotated[int, typer.Option(help="the most new tokens per reply")] = 256,
    temperature: Annotated[float, typer.Option(help="0: greedy")] = 0.0,
    top_p: Annotated[float, typer.Option(help="nucleus sampling's mass")] = 1.0,
    seed: Annotated[int, typer.Option(help="the PRNG seed (turn t uses seed + t)")] = 0,
    model: ModelOpt = "smollm2-135m",
    dtype: DtypeOpt = "float32",
):
    """Chat with the model through its chat template. Without --message, read user turns
    from stdin, one per line, keeping the conversation (/reset forgets it, /exit or
    end of input ends)."""
    from jaxkit.lm.local_chat import BadRequest, local_chat

    _check_sampling(max_tokens, temperature, top_p)
    _load(model, dtype)
    chat = local_chat(model, dtype)
    history: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    start = list(history)

    def reply(turn: int, text: str) -> str:
        history.append({"role": "user", "content": text})
        body = {"messages": history, "max_tokens": max_tokens, "temperature": temperature,
                "top_p": top_p, "seed": seed + turn}
        try:
            out = chat.complete(body)["choices"][0]["message"]["content"]
        except (BadRequest, FloatingPointError) as e:
            history.pop()
            raise ValueError(str(e)) from None
        history.append({"role": "assistant", "content": out})
        return out

    if message is not None:
        try:
            typer.echo(reply(0, message))
        except ValueError as e:
            _fail(str(e))
        return
    interactive = sys.stdin.isatty()
    if interactive:
        err_console.print(f"chatting with {model} (/reset, /exit)", highlight=False)
    turn = 0
    while True:
        try:
            line = input("> " if interactive else "")
        except (EOFError, KeyboardInterrupt):
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            break
        if text == "/reset":
            history[:] = start
            continue
        try:
            typer.echo(reply(turn, text))
        except ValueError as e:
            err_console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
        turn += 1


@lm_app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option(help="interface to bind (127.0.0.1: this machine "
                                           "only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    model: ModelOpt = "smollm2-135m",
    dtype: DtypeOpt = "float32",
    log: Annotated[bool, typer.Option(help="one line per request on stderr")] = True,
):
    """Serve the model as an OpenAI-compatible endpoint: POST /v1/chat/completions
    (streaming too), GET /v1/models. Point any client at http://HOST:PORT/v1 (for jaxkit:
    JAXKIT_LLM_BASE_URL)."""
    from jaxkit.lm.local_chat import local_chat
    from jaxkit.lm.serve import make_server

    if not 0 <= port <= 65535:
        _fail(f"--port must be in [0, 65535]; got {port}")
    _load(model, dtype)
    try:
        server = make_server(local_chat(model, dtype), host, port, log=log)
    except OSError as e:
        _fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
    bound = server.server_address[1]
    err_console.print(f"serving {model} at http://{host}:{bound}/v1 (Ctrl-C stops)",
                      highlight=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@lm_app.command("record-activations")
def record_cmd(
    model: Annotated[str, typer.Argument(
        help="'smollm2-135m', a .gguf file or a safetensors folder (any Llama-family model "
             "jaxkit.lm loads)")],
    text: Annotated[str, typer.Argument(
        help="a UTF-8 text file, or 'stdlib' (English prose shipped with Python)")],
    out: Annotated[str, typer.Option("--out", help="the store folder to write")],
    layers: Annotated[str, typer.Option(
        help="comma-separated blocks (0-based); the first is `activations`")] = "12",
    doc_len: Annotated[int, typer.Option(help="recorded tokens per document (plus one "
                                              "context token)")] = 64,
    n_docs: Annotated[int, typer.Option(help="documents (0: as many as the text "
                                             "holds)")] = 0,
    docs_per_shard: Annotated[int, typer.Option(help="documents per shard")] = 512,
    batch: Annotated[int, typer.Option(help="documents per forward pass")] = 16,
    dtype: DtypeOpt = "float32",
):
    """Record MODEL's residual stream over TEXT into an activation store (safetensors
    shards with `activations`, `tokens`, `first`, and `layers` for several blocks;
    acts.json and vocab.json beside them): what `jaxkit run tempbench --set acts_dir=OUT`
    and `jaxkit crosscoder train --activations OUT` read."""
    from jaxkit.lm.record import read_text, record_activations, text_documents

    try:
        blocks = [int(x) for x in layers.split(",") if x.strip()]
    except ValueError:
        _fail(f"--layers must be comma-separated integers; got {layers!r}")
    if not blocks:
        _fail("--layers names no block")
    for name, v in (("--doc-len", doc_len), ("--docs-per-shard", docs_per_shard),
                    ("--batch", batch)):
        if v < 1:
            _fail(f"{name} must be >= 1; got {v}")
    if n_docs < 0:
        _fail(f"--n-docs must be >= 0; got {n_docs}")
    try:
        body, prov = read_text(text)
    except ValueError as e:
        _fail(str(e))
    lm = _load(model, dtype)
    n_layers = lm.config.n_layers
    bad = [b for b in blocks if not 0 <= b < n_layers]
    if bad or len(set(blocks)) != len(blocks):
        _fail(f"--layers must be distinct blocks in [0, {n_layers}); got {blocks}")
    try:
        docs = text_documents(lm.tokenizer, body, doc_len=doc_len, n_docs=n_docs or None)
        path = record_activations(lm, docs, blocks, out, docs_per_shard=docs_per_shard,
                                  batch=batch, provenance=prov)
    except ValueError as e:
        _fail(str(e))
    err_console.print(f"recorded {len(docs)} documents x {doc_len} tokens of blocks "
                      f"{blocks} into {path}", highlight=False)
