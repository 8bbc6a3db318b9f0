"""The LLM audit of the semantic environments: a local language model asked, for every
ordered pair of an expert network's variables, whether one directly causes the other.

The paper audits its expert-built environments with a large language model. Here the
auditor is the model :mod:`jaxkit.lm` runs locally (SmolLM2-135M-Instruct by default), so
the question is first how much such an audit is worth: its agreement with the expert
graph.

For the pair ``(a, b)`` and a prompt template, the model reads the chat prompt
"In <domain>, does <a> directly cause <b>? Answer Yes or No." and its score is
``s(a -> b) = logit("Yes") - logit("No")`` at the first token of its reply (no sampling).
Per network and template:

* ``auroc``: the area under the ROC curve of ``s`` for the expert's directed edges against
  every other ordered pair (:func:`jaxkit.kernels.graph.auroc`); 0.5 is no agreement;
* ``orientation``: over the expert edges ``a -> b``, the fraction with
  ``s(a -> b) > s(b -> a)`` (0.5 is a coin);
* ``yes_rate`` and ``edges_affirmed``: the fraction of all pairs, and of expert edges,
  answered "Yes" (``s > 0``): an auditor that says "Yes" to everything affirms every edge;
* the negative control ``shuffled``: the same prompts with the variables' names permuted
  over the network (a fixed derangement per network), scored against the unpermuted
  expert graph; an auditor that reads the names can only agree by chance there, so its
  AUROC must stay near 0.5, while a bias of the measure itself (position, prompt length)
  would survive the shuffle.

Three templates (paraphrases) are the replicates: a verdict that depends on one wording
is not an audit. Names are made readable (``LVEDVOLUME`` -> "left ventricular
end-diastolic volume", ``tub`` -> "tuberculosis") from the networks' documentation
(bnlearn repository; Beinlich et al. 1989 for ALARM, Lauritzen and Spiegelhalter 1988 for
ASIA, Spiegelhalter et al. 1993 for CHILD, Binder et al. 1997 for INSURANCE); other names
are split at capitals and underscores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import jax.numpy as jnp
import numpy as np

from jaxkit.kernels import graph

from .results import AuditRow
from .semantic import Network, load_network

__all__ = ["TEMPLATES", "DOMAINS", "AuditRow", "label", "pair_prompts", "audit_scores",
           "audit_network", "audit", "lm_scorer"]

TEMPLATES = (
    "In {domain}, does {a} directly cause {b}? Answer Yes or No.",
    "Question about {domain}: is {a} a direct cause of {b}? Reply with Yes or No.",
    "Consider {domain}. If {a} changed, would {b} change as a direct result? "
    "Answer Yes or No.",
)

DOMAINS = {
    "sachs": "protein signalling in human T cells",
    "asia": "diagnosing lung disease in a chest clinic",
    "child": "diagnosing congenital heart disease in newborn babies",
    "alarm": "monitoring a ventilated patient in intensive care",
    "insurance": "car insurance claims",
    "Polzer_2012": "oral health and general health in adults",
    "Shrier_2008": "injuries in sport",
}

_LABELS = {
    "asia": {"asia": "a recent visit to Asia", "tub": "tuberculosis", "smoke": "smoking",
             "lung": "lung cancer", "bronc": "bronchitis",
             "either": "tuberculosis or lung cancer", "xray": "a positive chest X-ray",
             "dysp": "shortness of breath"},
    "sachs": {"Plcg": "PLC-gamma", "P38": "p38 MAPK", "Jnk": "JNK", "Erk": "ERK",
              "Akt": "Akt", "Mek": "MEK", "Raf": "Raf"},
    "child": {"HypDistrib": "hypoxia distribution", "HypoxiaInO2": "hypoxia in oxygen",
              "CO2": "CO2 level", "LVHreport": "reported left ventricular hypertrophy",
              "LowerBodyO2": "lower body oxygen", "RUQO2": "right upper quadrant oxygen",
              "CO2Report": "reported CO2", "Disease": "the type of heart disease",
              "LVH": "left ventricular hypertrophy", "DuctFlow": "ductal blood flow",
              "LungParench": "lung parenchyma", "Sick": "being sick",
              "Age": "age at presentation"},
    "alarm": {
        "HISTORY": "a history of left ventricular failure", "CVP": "central venous pressure",
        "PCWP": "pulmonary capillary wedge pressure", "HYPOVOLEMIA": "hypovolemia",
        "LVEDVOLUME": "left ventricular end-diastolic volume",
        "LVFAILURE": "left ventricular failure", "STROKEVOLUME": "stroke volume",
        "ERRLOWOUTPUT": "a low-output measurement error",
        "HRBP": "heart rate from the blood pressure monitor",
        "HREKG": "heart rate from the EKG", "ERRCAUTER": "electrocautery interference",
        "HRSAT": "heart rate from the oximeter", "INSUFFANESTH": "insufficient anesthesia",
        "ANAPHYLAXIS": "anaphylaxis", "TPR": "total peripheral resistance",
        "EXPCO2": "expired CO2", "KINKEDTUBE": "a kinked tube",
        "MINVOL": "minute ventilation", "FIO2": "the fraction of inspired oxygen",
        "PVSAT": "pulmonary venous oxygen saturation",
        "SAO2": "arterial oxygen saturation", "PAP": "pulmonary artery pressure",
        "PULMEMBOLUS": "pulmonary embolism", "SHUNT": "intrapulmonary shunt",
        "INTUBATION": "the intubation", "PRESS": "airway pressure",
        "DISCONNECT": "a disconnected ventilator", "MINVOLSET": "the minute volume setting",
        "VENTMACH": "the ventilator machine", "VENTTUBE": "ventilation through the tube",
        "VENTLUNG": "ventilation of the lungs", "VENTALV": "alveolar ventilation",
        "ARTCO2": "arterial CO2", "CATECHOL": "catecholamine level", "HR": "heart rate",
        "CO": "cardiac output", "BP": "blood pressure"},
    "insurance": {"SocioEcon": "socio-economic status", "ThisCarDam": "damage to this car",
                  "RuggedAuto": "how rugged the car is", "Accident": "accident severity",
                  "MakeModel": "the car's make and model", "DrivQuality": "driving quality",
                  "SeniorTrain": "senior driver training",
                  "ThisCarCost": "the cost of repairing this car",
                  "HomeBase": "the home neighbourhood", "PropCost": "property damage cost",
                  "OtherCarCost": "the cost to other cars",
                  "OtherCar": "other cars involved", "MedCost": "medical cost",
                  "ILiCost": "liability cost", "DrivHist": "driving history",
                  "Antilock": "antilock brakes", "AntiTheft": "an anti-theft device",
                  "Age": "the driver's age"},
}


def label(network: str, name: str) -> str:
    """A readable label of variable ``name`` of ``network``: the table above, else the
    name split at capitals and underscores, in lower case (acronyms of two or more
    capitals, with any digits after them, kept: ``PIP3``, ``CO2``)."""
    if name in _LABELS.get(network, {}):
        return _LABELS[network][name]
    words = re.findall(r"[A-Z]+\d+|[A-Z]{2,}(?=[A-Z][a-z]|\b)|[A-Z]?[a-z]+|[A-Z]+|\d+",
                       name.replace("_", " "))
    return " ".join(w if (w.upper() == w and len(w) > 1) else w.lower() for w in words) or name


def pair_prompts(net: Network, template: int, names: Sequence[str] | None = None
                 ) -> tuple[list[str], np.ndarray]:
    """The user messages for every ordered pair ``(a, b)``, ``a != b`` (``names``: the
    labels to use, default :func:`label` of each variable), and their ``(d * (d - 1), 2)``
    index pairs ``(a, b)``."""
    if not 0 <= template < len(TEMPLATES):
        raise ValueError(f"template must be in [0, {len(TEMPLATES)}), got {template}")
    d = len(net.names)
    names = [label(net.name, n) for n in net.names] if names is None else list(names)
    domain = DOMAINS.get(net.name, "this domain")
    pairs = np.asarray([(a, b) for a in range(d) for b in range(d) if a != b], np.int64)
    text = [TEMPLATES[template].format(domain=domain, a=names[a], b=names[b])
            for a, b in pairs]
    return text, pairs


def audit_scores(scores: np.ndarray, pairs: np.ndarray, adj: np.ndarray
                 ) -> tuple[float, float, float, float]:
    """``(auroc, orientation, yes_rate, edges_affirmed)`` of pair scores ``s(a -> b)``
    against the expert graph ``adj`` (``adj[i, j]``: ``j -> i``)."""
    d = adj.shape[0]
    s = np.full((d, d), -np.inf)
    s[pairs[:, 1], pairs[:, 0]] = scores  # [b, a]: the edge a -> b
    np.fill_diagonal(s, 0.0)
    au = float(graph.auroc(jnp.asarray(adj != 0), jnp.asarray(s)))
    bi, ai = np.nonzero(adj)  # expert edges a -> b
    orient = float(np.mean(s[bi, ai] > s[ai, bi])) if len(ai) else float("nan")
    affirmed = float(np.mean(s[bi, ai] > 0)) if len(ai) else float("nan")
    return au, orient, float(np.mean(scores > 0)), affirmed


def _derangement(d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    while True:
        p = rng.permutation(d)
        if d < 2 or not np.any(p == np.arange(d)):
            return p


def audit_network(score: Callable[[list[str]], np.ndarray], net: Network, template: int,
                  *, seed: int = 0) -> AuditRow:
    """The audit of ``net`` with one template: ``score(messages)`` gives
    ``logit("Yes") - logit("No")`` per user message (:func:`lm_scorer`); the shuffled
    control permutes the labels by a derangement drawn from ``seed``."""
    labels = [label(net.name, n) for n in net.names]
    text, pairs = pair_prompts(net, template, labels)
    perm = _derangement(len(labels), seed)
    text_sh, _ = pair_prompts(net, template, [labels[p] for p in perm])
    s = np.asarray(score(text + text_sh), np.float64)
    if s.shape != (2 * len(text),):
        raise ValueError(f"score returned shape {s.shape} for {2 * len(text)} messages")
    if not np.all(np.isfinite(s)):
        raise FloatingPointError(f"audit of {net.name}: non-finite scores")
    real = audit_scores(s[:len(text)], pairs, net.adj)
    sh = audit_scores(s[len(text):], pairs, net.adj)
    return AuditRow(network=net.name, template=template, n_vars=len(labels),
                    n_edges=int((net.adj != 0).sum()), auroc=real[0], orientation=real[1],
                    yes_rate=real[2], edges_affirmed=real[3], shuffled_auroc=sh[0],
                    shuffled_orientation=sh[1])


def lm_scorer(model, *, batch: int = 16, words: tuple[str, str] = ("Yes", "No")
              ) -> Callable[[list[str]], np.ndarray]:
    """``messages -> logit(words[0]) - logit(words[1])`` (``"Yes"``, ``"No"``) at the first
    token of the reply of a :class:`jaxkit.lm.LanguageModel` to each message in its chat
    template; each word must be one token."""
    tok = model.tokenizer
    ids = []
    for word in words:
        t = tok.encode(word, add_bos=False)
        if len(t) != 1:
            raise ValueError(f"the model's tokenizer splits {word!r} into {len(t)} tokens")
        ids.append(t[0])

    def score(messages: list[str]) -> np.ndarray:
        prompts = [tok.chat_prompt([{"role": "user", "content": m}]) for m in messages]
        z = model.next_logits(prompts, among=ids, batch=batch)
        return z[:, 0] - z[:, 1]

    return score


def audit(networks: Sequence[str], *, model: str = "smollm2-135m",
          templates: int = len(TEMPLATES), seed: int = 0, batch: int = 16
          ) -> list[AuditRow]:
    """:func:`audit_network` for each network and each of the first ``templates``
    templates with the local model ``model`` (:func:`jaxkit.lm.load`)."""
    from jaxkit import lm

    if not 1 <= templates <= len(TEMPLATES):
        raise ValueError(f"templates must be in [1, {len(TEMPLATES)}], got {templates}")
    score = lm_scorer(lm.load(model), batch=batch)
    return [audit_network(score, load_network(n), t, seed=seed + i)
            for i, n in enumerate(networks) for t in range(templates)]
