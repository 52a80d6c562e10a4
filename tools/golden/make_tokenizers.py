"""Train small tokenizers with HF tokenizers and record HF's encodings as parity fixtures.

Run on the GPU machine (it has `tokenizers` and `transformers`):
    python3 tools/golden/make_tokenizers.py OUT_DIR
Writes OUT_DIR/tokenizers/<variant>/{tokenizer.json, tokenizer_config.json, cases.jsonl}.
cases.jsonl: one line per test string: text, ids (no special tokens added), ids_special
(with the post-processor's special tokens), decoded (HF decode of ids, specials kept).

Variants:
  qwen2_bytelevel   byte-level BPE, Qwen2 split regex, NFC normalizer, added special tokens
  gpt2_bytelevel    byte-level BPE with ByteLevel's own GPT-2 regex
  llama3_bytelevel  byte-level BPE, Llama-3 regex, ignore_merges, BOS template
  sp_legacy         SentencePiece-style BPE: Prepend+Replace normalizer, byte fallback, BOS template
  sp_metaspace      the same vocabulary with a Metaspace pre-tokenizer (prepend_scheme=first)
"""
import glob
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers import AddedToken
from transformers import PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(__file__))
from test_strings import HAND_WRITTEN, all_strings  # noqa: E402

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def corpus():
    """Python's standard library sources (English prose in docstrings, code) plus multilingual lines."""
    lines = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))[:120]:
        with open(path, encoding="utf-8", errors="ignore") as f:
            lines.extend(f.read().splitlines(keepends=True))
    lines.extend(HAND_WRITTEN * 20)
    return lines


def train_bytelevel(name, split, ignore_merges=False, bos=None):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + ([bos] if bos else [])
    try:
        model = models.BPE(ignore_merges=ignore_merges)
    except TypeError:
        model = models.BPE()
    tok = Tokenizer(model)
    if split is None:  # GPT-2: ByteLevel applies its own regex
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=768, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    tok.add_tokens([AddedToken("[NEWTOK]", special=False)])
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token=bos,
                                 additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    return tok, hf, specials


def train_sentencepiece_style():
    """BPE with byte fallback: <unk> <s> </s>, then <0x00>..<0xFF>, then the learned pieces."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=150, show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    spec = json.loads(tok.to_str())
    old_vocab = spec["model"]["vocab"]
    ordered = sorted(old_vocab.items(), key=lambda kv: kv[1])
    specials = [t for t, _ in ordered[:3]]
    vocab = {t: i for i, t in enumerate(specials)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for t, _ in ordered[3:]:
        vocab[t] = len(vocab)
    spec["model"]["vocab"] = vocab
    spec["model"]["byte_fallback"] = True
    spec["model"]["fuse_unk"] = True
    for added in spec["added_tokens"]:
        added["id"] = vocab[added["content"]]
    base = Tokenizer.from_str(json.dumps(spec))
    base.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                      decoders.Strip(" ", 1, 0)])
    base.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", vocab["<s>"])])

    legacy = Tokenizer.from_str(base.to_str())
    legacy.pre_tokenizer = None
    legacy.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    metaspace = Tokenizer.from_str(base.to_str())
    metaspace.normalizer = None
    metaspace.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    out = []
    for tok in (legacy, metaspace):
        hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
        out.append((tok, hf, ["<unk>", "<s>", "</s>"]))
    return out


def write_variant(out_dir, name, tok, hf, specials):
    d = os.path.join(out_dir, "tokenizers", name)
    os.makedirs(d, exist_ok=True)
    hf.save_pretrained(d)
    tok.save(os.path.join(d, "tokenizer.json"))  # the exact pipeline we trained, pretty-printed
    with open(os.path.join(d, "cases.jsonl"), "w", encoding="utf-8") as f:
        for text in all_strings(specials):
            ids = tok.encode(text, add_special_tokens=False).ids
            ids_special = tok.encode(text, add_special_tokens=True).ids
            decoded = tok.decode(ids, skip_special_tokens=False)
            f.write(json.dumps({"text": text, "ids": ids, "ids_special": ids_special, "decoded": decoded},
                               ensure_ascii=False) + "\n")
    print(f"{name}: vocab {tok.get_vocab_size()}, {len(all_strings(specials))} cases")


def main():
    out_dir = sys.argv[1]
    write_variant(out_dir, "qwen2_bytelevel", *train_bytelevel("qwen2", QWEN2_REGEX))
    write_variant(out_dir, "gpt2_bytelevel", *train_bytelevel("gpt2", None))
    write_variant(out_dir, "llama3_bytelevel", *train_bytelevel("llama3", LLAMA3_REGEX, ignore_merges=True,
                                                                 bos="<|begin_of_text|>"))
    legacy, metaspace = train_sentencepiece_style()
    write_variant(out_dir, "sp_legacy", *legacy)
    write_variant(out_dir, "sp_metaspace", *metaspace)


if __name__ == "__main__":
    main()
