"""Pretrain the embedded testbed model (a small Qwen3) on the GPU machine, reproducibly from a seed.

    python3 tools/testbed/train.py --corpus corpus --out OUT --total-seconds 540 --seed 20261129

Inputs: corpus/corpus.jsonl.xz and corpus/heldout.jsonl.xz from build_corpus.py (Debian text), plus
procedural long-context documents from procedural.py, generated here from the seed.
Steps, all inside --total-seconds of wall clock:
  1. byte-level BPE tokenizer (Qwen2 split regex, NFC) trained with HF tokenizers on a corpus sample;
  2. every document tokenized; training windows of 4,096 tokens (--window: fewer), each starting with
     <|bos|> (so an attention sink can form on it) followed by documents joined by <|endoftext|>;
  3. Qwen3ForCausalLM (GQA 4:1) trained with AdamW, bf16 autocast, until the deadline (the learning
     rate follows warm-up then cosine decay over the time budget);
  4. every few hundred steps: held-out loss, and the attention mass on the first token per layer
     (averaged over heads) for queries at 16–63, 128–1,023 and 1,024–4,095, against the uniform mass;
  5. saved with save_pretrained in bf16, with the tokenizer files and training_log.json.
"""
import argparse
import json
import lzma
import math
import multiprocessing
import os
import random
import sys
import time

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
import procedural  # noqa: E402

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
BOS, EOS = "<|bos|>", "<|endoftext|>"
CONTEXT = 4096  # the model's context (max_position_embeddings); training windows may be shorter (--window)
MEASURE_TOKENS = 1024  # measure(): queries before it are "near the start", from it on "far"


def log(start, *parts):
    print(f"[{time.time() - start:7.1f}s]", *parts, flush=True)


def read_jsonl_xz(path):
    with lzma.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


_PROSE = None


def _procedural_worker(job):
    seed, n_chars = job
    documents, total = [], 0
    for document in procedural.mixed_documents(seed, procedural.make_corpus_filler(_PROSE)):
        documents.append(document)
        total += len(document)
        if total >= n_chars:
            break
    return documents


def _init_worker(prose):
    global _PROSE
    _PROSE = prose


def generate_procedural(seed, n_chars, prose, processes):
    per = n_chars // processes + 1
    with multiprocessing.get_context("fork").Pool(processes, initializer=_init_worker, initargs=(prose,)) as pool:
        chunks = pool.map(_procedural_worker, [(seed * 1000 + i, per) for i in range(processes)])
    return [d for chunk in chunks for d in chunk]


def load_or_generate_procedural(args, prose):
    """Generating 150 M characters takes a minute on 14 processes: runs sharing a seed can share the result."""
    cache = args.procedural_cache
    if cache and os.path.exists(cache):
        with open(cache, encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    generated = generate_procedural(args.seed, int(args.procedural_chars), prose, processes=14)
    if cache:
        with open(cache + ".partial", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d) + "\n" for d in generated)
        os.replace(cache + ".partial", cache)
    return generated


def train_tokenizer(texts, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, BOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def token_stream(tokenizer, texts, eos_id):
    """All documents' ids joined by EOS, and the offset where each document starts."""
    encoded = tokenizer.encode_batch(texts, add_special_tokens=False)
    lengths = torch.tensor([len(e.ids) + 1 for e in encoded], dtype=torch.int64)
    ids = torch.empty(int(lengths.sum()), dtype=torch.int32)
    starts = torch.zeros(len(encoded), dtype=torch.int64)
    position = 0
    for i, e in enumerate(encoded):
        starts[i] = position
        ids[position:position + len(e.ids)] = torch.tensor(e.ids, dtype=torch.int32)
        ids[position + len(e.ids)] = eos_id
        position += len(e.ids) + 1
    return ids, starts


def sample_batch(generator, streams, weights, batch, window, bos_id, device):
    """Windows of `window` tokens: <|bos|> then window−1 tokens from a document start onwards."""
    rows = []
    choices = torch.multinomial(torch.tensor(weights), batch, replacement=True, generator=generator)
    for c in choices.tolist():
        ids, starts = streams[c]
        limit = int(torch.searchsorted(starts, torch.tensor(len(ids) - window)))
        start = int(starts[torch.randint(0, max(1, limit), (1,), generator=generator)])
        rows.append(torch.cat([torch.tensor([bos_id], dtype=torch.int32), ids[start:start + window - 1]]))
    return torch.stack(rows).to(device=device, dtype=torch.long, non_blocking=True)


def sample_short_batch(generator, streams, weights, window, bos_id, device):
    """98,304 tokens as windows of `window` tokens: <|bos|> then text from any position of a stream.

    Real corpora hold many short documents, each read from its start: most training contexts are
    short and begin at <|bos|>, where averaging over a few tokens is no "do nothing" for a head, and a
    sink on <|bos|> is. These windows give the model that experience (an SWA cache with sinks is the
    same picture: <|bos|> and the recent tokens)."""
    count = 98304 // window
    per_stream = torch.bincount(torch.multinomial(torch.tensor(weights), count, replacement=True, generator=generator),
                                minlength=len(streams))
    rows = []
    for (ids, _), n in zip(streams, per_stream.tolist()):
        if n == 0:
            continue
        offsets = torch.randint(0, len(ids) - window, (n, 1), generator=generator)
        rows.append(ids[offsets + torch.arange(window - 1)])
    body = torch.cat(rows)
    batch = torch.cat([torch.full((count, 1), bos_id, dtype=torch.int32), body], dim=1)
    return batch.to(device=device, dtype=torch.long, non_blocking=True)


def set_attention(model, implementation):
    try:
        model.set_attn_implementation(implementation)
    except AttributeError:  # older transformers
        model.config._attn_implementation = implementation


def first_token_mass(attentions, begin, end):
    """Per layer: the mean over heads and over queries begin … end−1 of the attention on key 0,
    the strongest head's mean, and the share of heads above 0.3 (Gu et al.'s sink ratio)."""
    per_head = [a[0, :, begin:end, 0].float().mean(dim=1) for a in attentions]  # [heads] per layer
    return ([round(float(h.mean()), 4) for h in per_head], [round(float(h.max()), 4) for h in per_head],
            [round(float((h > 0.3).float().mean()), 3) for h in per_head])


def uniform_mass(begin, end):
    """What a uniform distribution over the visible keys puts on key 0, averaged over queries begin … end−1."""
    return round(float((1.0 / torch.arange(begin + 1, end + 1, dtype=torch.float64)).mean()), 5)


@torch.no_grad()
def measure(model, heldout_batch):
    """Held-out loss, and the attention mass on the first token in three ranges of query positions:
    16–63 (a 64-token window with sinks sees this), 128–1,023 (the measure since stage 1) and
    1,024–4,095 (a sink that holds at every distance keeps its mass there)."""
    model.eval()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(heldout_batch, labels=heldout_batch).loss.item()
    previous = model.config._attn_implementation
    set_attention(model, "eager")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        attentions = model(heldout_batch, output_attentions=True).attentions  # [1, heads, n, n] per layer
    set_attention(model, previous)
    model.train()
    n = heldout_batch.shape[1]
    mid, mid_strongest, mid_over = first_token_mass(attentions, 128, MEASURE_TOKENS)
    early, _, _ = first_token_mass(attentions, 16, 64)
    far, far_strongest, _ = first_token_mass(attentions, MEASURE_TOKENS, n)
    return loss, {"first_token_mass": mid, "first_token_mass_strongest_head": mid_strongest, "heads_over_0.3": mid_over,
                  "uniform_mass": uniform_mass(128, MEASURE_TOKENS),
                  "first_token_mass_queries_16_63": early, "uniform_mass_queries_16_63": uniform_mass(16, 64),
                  f"first_token_mass_queries_{MEASURE_TOKENS}_{n - 1}": far,
                  f"strongest_head_queries_{MEASURE_TOKENS}_{n - 1}": far_strongest,
                  f"uniform_mass_queries_{MEASURE_TOKENS}_{n - 1}": uniform_mass(MEASURE_TOKENS, n)}


def check_rope_base(model, config):
    """The rotary frequencies the model will use are those of the configured base (--rope-theta
    overrides a checkpoint's): stop before training if they are not."""
    parameters = getattr(config, "rope_parameters", None) or {}
    base = parameters.get("rope_theta", getattr(config, "rope_theta", None))
    inv_freq = model.model.rotary_emb.inv_freq.float().cpu()
    head_dim = inv_freq.numel() * 2
    expected = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    if not torch.allclose(inv_freq, expected, rtol=1e-4):
        sys.exit(f"rotary frequencies do not follow the RoPE base {base}: the model has {inv_freq[:4].tolist()}…")
    print(f"RoPE base {base:g}: lowest frequency {float(inv_freq[-1]):.3g} rad/token", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--total-seconds", type=float, default=540)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--vocab", type=int, default=12288)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=8, help="query heads (4 per KV head: GQA 4:1)")
    parser.add_argument("--head-dim", type=int, default=0, help="0: hidden / heads")
    parser.add_argument("--intermediate", type=int, default=0, help="0: hidden * 8/3, rounded down to 64")
    parser.add_argument("--window", type=int, default=CONTEXT,
                        help="training window in tokens (each starts with <|bos|>); the model's context stays 4,096")
    parser.add_argument("--batch", type=int, default=0, help="windows per step; 0: 98,304 tokens per step")
    parser.add_argument("--short-windows", default="",
                        help="comma-separated lengths: a share of the steps (--short-share) uses windows of one of them, "
                             "<|bos|> then text from anywhere in the stream")
    parser.add_argument("--short-share", type=float, default=0.5)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--procedural-chars", type=float, default=100e6)
    parser.add_argument("--procedural-share", type=float, default=0.35)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--init", help="continue from this saved model (its tokenizer is kept)")
    parser.add_argument("--tokenizer", help="a fresh model with this tokenizer.json instead of training a new one")
    parser.add_argument("--procedural-cache", help="a file: load the procedural documents from it, or generate and save them")
    parser.add_argument("--rope-theta", type=float, default=0,
                        help="RoPE base; 0: 100,000 for a fresh model, the checkpoint's own with --init. A larger base "
                             "leaves more dimensions nearly unrotated over 4,096 tokens, where a key that is a sink "
                             "at every distance can live")
    parser.add_argument("--exclude-sources", default="",
                        help="comma-separated corpus sources (mixture.json's names) left out of training")
    parser.add_argument("--measure-every", type=int, default=400, help="steps between held-out measurements")
    parser.add_argument("--compile", action="store_true", help="torch.compile the training step (eager if that fails)")
    args = parser.parse_args()
    if not 128 < args.window <= CONTEXT:
        sys.exit(f"--window must be in (128, {CONTEXT}]")
    args.batch = args.batch or 98304 // args.window
    short_windows = [int(w) for w in args.short_windows.split(",") if w]
    if any(not 1 < w < args.window for w in short_windows):
        sys.exit(f"--short-windows must be shorter than --window ({args.window})")
    start = time.time()
    deadline = start + args.total_seconds - 45  # leave time to save and measure
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    device = "cuda"
    os.makedirs(args.out, exist_ok=True)

    excluded = {name for name in args.exclude_sources.split(",") if name}
    with open(os.path.join(args.corpus, "mixture.json")) as f:
        known_sources = set(json.load(f)["sources"])
    if excluded - known_sources:
        sys.exit(f"--exclude-sources: {', '.join(sorted(excluded - known_sources))} not among the corpus's sources "
                 f"({', '.join(sorted(known_sources))}; {args.corpus}/mixture.json)")
    documents = [d for d in read_jsonl_xz(os.path.join(args.corpus, "corpus.jsonl.xz")) if d["source"] not in excluded]
    heldout = read_jsonl_xz(os.path.join(args.corpus, "heldout.jsonl.xz"))
    natural = [d["text"] for d in documents]
    prose = "\n".join(d["text"] for d in documents if d["source"] in ("python-docs", "debian-ref", "gcide"))
    log(start, f"corpus: {len(natural)} documents, {sum(map(len, natural)) / 1e6:.1f} M chars")
    generated = load_or_generate_procedural(args, prose)
    log(start, f"procedural: {len(generated)} documents, {sum(map(len, generated)) / 1e6:.1f} M chars")

    sample = random.Random(args.seed)
    tokenizer_texts = sample.sample(natural, k=min(len(natural), 1500)) + generated[:2000]
    if args.init or args.tokenizer:
        tok = Tokenizer.from_file(args.tokenizer or os.path.join(args.init, "tokenizer.json"))
    else:
        tok = train_tokenizer(tokenizer_texts, args.vocab)
    bos_id, eos_id = tok.token_to_id(BOS), tok.token_to_id(EOS)
    log(start, f"tokenizer: vocab {tok.get_vocab_size()}")
    streams = [token_stream(tok, natural, eos_id), token_stream(tok, generated, eos_id)]
    heldout_ids, _ = token_stream(tok, [d["text"] for d in heldout if d["source"] == "python-docs"], eos_id)
    log(start, f"tokens: natural {len(streams[0][0]) / 1e6:.1f} M, procedural {len(streams[1][0]) / 1e6:.1f} M, "
               f"held-out {len(heldout_ids) / 1e6:.2f} M")
    heldout_batch = torch.cat([torch.tensor([bos_id]), heldout_ids[:CONTEXT - 1].long()]).view(1, -1).to(device)

    vocab = (tok.get_vocab_size() + 63) // 64 * 64
    if args.heads % 4 != 0:
        sys.exit("--heads must be a multiple of 4 (GQA 4:1)")
    intermediate = args.intermediate or args.hidden * 8 // 3 // 64 * 64
    head_dim = args.head_dim or args.hidden // args.heads
    config = Qwen3Config(vocab_size=vocab, hidden_size=args.hidden, intermediate_size=intermediate,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.heads // 4, head_dim=head_dim,
                         max_position_embeddings=CONTEXT, rope_theta=args.rope_theta or 100000.0,
                         rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=bos_id, eos_token_id=eos_id,
                         pad_token_id=None, initializer_range=0.02, attention_dropout=0.0)
    if args.init:
        config = Qwen3Config.from_pretrained(args.init)
        if args.rope_theta:  # rotary frequencies are computed from the config when the model is built
            config.rope_parameters = {"rope_theta": args.rope_theta, "rope_type": "default"}
        model = Qwen3ForCausalLM.from_pretrained(args.init, config=config, dtype=torch.float32).to(device)
    else:
        model = Qwen3ForCausalLM(config).to(device)
    set_attention(model, "sdpa")
    check_rope_base(model, config)
    parameters = sum(p.numel() for p in model.parameters())
    log(start, f"model: {parameters / 1e6:.2f} M parameters, config {config.to_json_string(use_diff=True)}")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    weights = [1 - args.procedural_share, args.procedural_share]
    train_start = time.time()
    train_seconds = deadline - train_start
    warmup = 150
    history, step, tokens_seen = [], 0, 0
    # The compiled module shares its parameters with `model`; measure() keeps using the eager one,
    # which it switches to eager attention to read the attention probabilities.
    step_model = torch.compile(model) if args.compile else model
    while time.time() < deadline:
        progress = (time.time() - train_start) / train_seconds
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))
        for group in optimizer.param_groups:
            group["lr"] = lr
        if short_windows and float(torch.rand((), generator=generator)) < args.short_share:
            window = short_windows[int(torch.randint(0, len(short_windows), (), generator=generator))]
            batch = sample_short_batch(generator, streams, weights, window, bos_id, device)
        else:
            batch = sample_batch(generator, streams, weights, args.batch, args.window, bos_id, device)
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = step_model(batch, labels=batch).loss
        except Exception as error:  # noqa: BLE001 — compilation failed: train eagerly instead
            if step_model is model:
                raise
            log(start, f"torch.compile failed ({type(error).__name__}: {error}); training eagerly")
            step_model = model
            optimizer.zero_grad(set_to_none=True)
            continue
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        tokens_seen += batch.numel()
        if step % 50 == 0 or step % args.measure_every == 0:
            elapsed = time.time() - train_start
            entry = {"step": step, "tokens": tokens_seen, "seconds": round(elapsed, 1), "loss": round(loss.item(), 4),
                     "lr": lr, "tokens_per_second": round(tokens_seen / elapsed)}
            if step % args.measure_every == 0:
                heldout_loss, masses = measure(model, heldout_batch)
                entry.update({"heldout_loss": round(heldout_loss, 4), **masses})
            history.append(entry)
            log(start, json.dumps(entry))

    heldout_loss, masses = measure(model, heldout_batch)
    final = {"step": step, "tokens": tokens_seen, "seconds": round(time.time() - train_start, 1),
             "heldout_loss": round(heldout_loss, 4), **masses}
    history.append(final)
    log(start, "final", json.dumps(final))
    model.to(torch.bfloat16).save_pretrained(args.out, max_shard_size="12MB")  # files of <= 16 MiB travel
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS)
    hf.save_pretrained(args.out)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    summary = {"seed": args.seed, "init": args.init, "weight_decay": args.weight_decay, "parameters": parameters, "tokens_seen": tokens_seen, "steps": step,
               "train_seconds": round(time.time() - train_start, 1), "batch": args.batch, "window": args.window,
               "short_windows": short_windows, "excluded_sources": sorted(excluded), "short_share": args.short_share if short_windows else 0,
               "config": json.loads(config.to_json_string(use_diff=True)),
               "procedural_share": args.procedural_share, "lr": args.lr, "compiled": step_model is not model,
               "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "natural_tokens": len(streams[0][0]), "procedural_tokens": len(streams[1][0]), "history": history}
    with open(os.path.join(args.out, "training_log.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log(start, f"saved to {args.out}: {sorted(os.listdir(args.out))}")


if __name__ == "__main__":
    main()
