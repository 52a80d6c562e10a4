"""Extra tokenizer fixtures for the pipeline pieces the five trained variants do not exercise.

Run on the GPU machine (it has `tokenizers`), from the repository root:
    python3 tools/golden/make_tokenizer_features.py OUT_DIR
Writes OUT_DIR/features/<variant>/{tokenizer.json, cases.jsonl, decode_cases.jsonl} and
OUT_DIR/features/decode_<original variant>.jsonl; unpack into tests/golden/tokenizers/.

Each variant reuses the vocabulary and merges of a fixture in tests/golden/tokenizers and swaps
the normalizer, pre-tokenizer, added tokens, post-processor or decoder, so the fixture pins HF's
behaviour for: Metaspace prepend_scheme always/never with split, Metaspace decoder, unk with and
without fuse_unk (no byte fallback), NFKC/NFD/Lowercase/Strip/StripAccents/Replace(Regex)
normalizers, Split behaviours (removed, merged_with_previous, merged_with_next, contiguous,
invert, String patterns), Digits, Whitespace, WhitespaceSplit, ByteLevel add_prefix_space,
added tokens with lstrip/rstrip/single_word/normalized, Roberta/Bert/Sequence post-processors,
Strip decoder with stop, Replace decoder with a regex, no decoder at all, the legacy "a b" merge
format, and continuing_subword_prefix / end_of_word_suffix.

cases.jsonl: text, ids, ids_special, decoded (decode(ids)), decoded_skip (skip_special_tokens).
decode_cases.jsonl: random id lists (specials and byte tokens included) with decoded and
decoded_skip, to pin decoders on sequences encode never makes (broken UTF-8, stray specials).
Written for bifocal.
"""
import json
import os
import random
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(__file__))
from test_strings import HAND_WRITTEN, generated, special_cases  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden", "tokenizers")
BYTE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "[NEWTOK]"]
SP_SPECIALS = ["<unk>", "<s>", "</s>"]

EXTRA = [
    "Hello <mask> world", "a<mask>b", "  <mask>  x", "<mask>", " <mask>", "x <mask>\n\ny",
    "word words sword word. (word)", "WORD Word wordy", "ABC abc Abc xABCx", "the end", "Theend",
    "\uff26\uff55\uff4c\uff4c width \u2460\u2461 \u00b2", "\u01c4 \u0130stanbul \u03a3\u0391\u03a3",
    "x\u00a0y\u2009z", "tab\there", "end   ", "   start", "  both  ", "12345 67.89", "\u0663\u0664\u0665 \u2460\u2461",
    "a--b---c", "x__y", "e.g. i.e. etc.", "don't stop", "caf\u00e9 CAF\u00c9 cafe\u0301", "\u212b \u2126",
    "\u00e9\u00e8\u00ea \u00f1", "  \n\t ", "\u3000ideographic\u3000space", "zero\u200bwidth", "\u2581already\u2581marked",
    "##hash##", "a</w>b", "\U0001f600\U0001f600x", "\u05e9\u05dc\u05d5\u05dd world",
]


def strings(specials):
    return HAND_WRITTEN + EXTRA + special_cases(specials) + generated(60, seed=7)


def load(variant):
    return json.loads(Tokenizer.from_file(os.path.join(GOLDEN, variant, "tokenizer.json")).to_str())


def build(spec):
    return Tokenizer.from_str(json.dumps(spec))


def with_parts(variant, **parts):
    """The fixture's tokenizer with some pipeline parts replaced (given as tokenizers objects)."""
    tok = build(load(variant))
    for name, value in parts.items():
        setattr(tok, name, value)
    return tok


def sp_model(**changes):
    spec = load("sp_legacy")
    spec["model"].update(changes)
    return build(spec)


def variants():
    out = {}
    meta = lambda scheme: dict(replacement="\u2581", prepend_scheme=scheme, split=True)  # noqa: E731
    out["sp_metaspace_always"] = with_parts(
        "sp_metaspace", pre_tokenizer=pre_tokenizers.Metaspace(**meta("always")), decoder=decoders.Metaspace(**meta("always")))
    out["sp_metaspace_never"] = with_parts(
        "sp_metaspace", pre_tokenizer=pre_tokenizers.Metaspace(**meta("never")), decoder=decoders.Metaspace(**meta("never")))
    tok = sp_model(byte_fallback=False, fuse_unk=False)
    out["sp_unk_unfused"] = tok
    tok = sp_model(byte_fallback=False, fuse_unk=True)
    # Strip with stop > 0 panics in HF on an empty token, so it strips per token, before Fuse.
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.Strip(" ", 0, 1), decoders.Fuse()])
    out["sp_unk_fused_strip_end"] = tok
    out["sp_nfkc_lowercase_strip"] = with_parts(
        "sp_legacy",
        normalizer=normalizers.Sequence([
            normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip(left=True, right=True),
            normalizers.Replace(Regex(r"\s+"), " "), normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]),
        post_processor=processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]))
    out["sp_nfd_strip_accents_regex_decoder"] = with_parts(
        "sp_legacy",
        normalizer=normalizers.Sequence([
            normalizers.NFD(), normalizers.StripAccents(), normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]),
        decoder=decoders.Sequence([decoders.Replace(Regex("\u2581+"), " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 2, 0)]))
    out["bytelevel_split_merged"] = with_parts(
        "qwen2_bytelevel", normalizer=None,
        pre_tokenizer=pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\s+"), behavior="merged_with_next"),
            pre_tokenizers.Split(".", behavior="merged_with_previous"),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)]),
        post_processor=processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|im_start|> $A <|im_end|>",
                                          special_tokens=[("<|im_start|>", 1), ("<|im_end|>", 2)])]))
    out["bytelevel_split_inverted"] = with_parts(
        "qwen2_bytelevel", normalizer=normalizers.NFKC(),
        pre_tokenizer=pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\p{L}+"), behavior="removed", invert=True),
            pre_tokenizers.Split("e", behavior="contiguous"),
            pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="isolated", invert=True),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        post_processor=processors.RobertaProcessing(("<|im_end|>", 2), ("<|im_start|>", 1)))
    out["bytelevel_whitespace"] = with_parts(
        "qwen2_bytelevel", normalizer=None,
        pre_tokenizer=pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        post_processor=processors.BertProcessing(("<|im_end|>", 2), ("<|im_start|>", 1)))
    out["bytelevel_whitespace_split_prefix"] = with_parts(
        "gpt2_bytelevel",
        pre_tokenizer=pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                               pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)]))
    tok = with_parts("qwen2_bytelevel", normalizer=normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()]))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, normalized=False)])
    tok.add_tokens([AddedToken("word", single_word=True, normalized=False), AddedToken("ABC", normalized=True),
                    AddedToken("the end", normalized=False)])
    out["bytelevel_added_token_options"] = tok

    # The legacy merge format: "left right" strings instead of pairs.
    spec = load("qwen2_bytelevel")
    spec["model"]["merges"] = [" ".join(pair) for pair in spec["model"]["merges"]]
    out["bytelevel_legacy_merges"] = (build(spec), spec)

    # A BPE with affixes and no decoder: train a small one.
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]", "[CLS]", "[SEP]"], show_progress=False,
                                  continuing_subword_prefix="##", end_of_word_suffix="</w>", limit_alphabet=80)
    tok.train_from_iterator(HAND_WRITTEN * 10, trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    out["bpe_affixes_no_decoder"] = tok
    return out


def specials_of(tok):
    return [t.content for t in tok.get_added_tokens_decoder().values()]


def write_cases(path, tok, texts):
    with open(path, "w", encoding="utf-8") as f:
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            f.write(json.dumps({
                "text": text, "ids": ids, "ids_special": tok.encode(text, add_special_tokens=True).ids,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(ids, skip_special_tokens=True)}, ensure_ascii=False) + "\n")


def write_decode_cases(path, tok, seed):
    rng = random.Random(seed)
    vocab = tok.get_vocab()
    byte_ids = [i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x") and t.endswith(">")]
    special_ids = list(tok.get_added_tokens_decoder().keys())
    all_ids = sorted(vocab.values())
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(150):
            ids = []
            for _ in range(rng.randint(1, 12)):
                roll = rng.random()
                pool = byte_ids if (roll < 0.35 and byte_ids) else special_ids if roll < 0.45 else all_ids
                ids.append(rng.choice(pool))
            f.write(json.dumps({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                                "decoded_skip": tok.decode(ids, skip_special_tokens=True)}, ensure_ascii=False) + "\n")


def main():
    out_dir = os.path.join(sys.argv[1], "features")
    os.makedirs(out_dir, exist_ok=True)
    print("tokenizers", tokenizers.__version__)
    for index, (name, tok) in enumerate(variants().items()):
        spec = None
        if isinstance(tok, tuple):
            tok, spec = tok
        else:
            tok = Tokenizer.from_str(tok.to_str())  # encode with what the saved file says
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(spec, ensure_ascii=False, indent=1) if spec else tok.to_str(pretty=True))
        specials = specials_of(tok) + (["<mask>"] if "<mask>" not in specials_of(tok) else [])
        texts = strings(specials)
        write_cases(os.path.join(d, "cases.jsonl"), tok, texts)
        write_decode_cases(os.path.join(d, "decode_cases.jsonl"), tok, seed=index)
        print(f"{name}: vocab {tok.get_vocab_size()}, {len(texts)} cases")
    for index, variant in enumerate(["qwen2_bytelevel", "gpt2_bytelevel", "llama3_bytelevel", "sp_legacy", "sp_metaspace"]):
        tok = Tokenizer.from_file(os.path.join(GOLDEN, variant, "tokenizer.json"))
        write_decode_cases(os.path.join(out_dir, f"decode_{variant}.jsonl"), tok, seed=100 + index)


if __name__ == "__main__":
    main()
