"""Test strings for tokenizer parity (tests/golden/tokenizers/).

Hand-written cases cover each category the tokenizer must get exactly right; a seeded generator
adds combinations of them so the suite holds well over 200 strings. Written for bifocal.
"""
import random

HAND_WRITTEN = [
    "",
    " ",
    "a",
    "Hello, world!",
    "Hello world",
    " Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX",
    "It's a dog's life, isn't it? We'll see; they've gone and I'm here, you're there, she'd go.",
    "IT'S WE'LL THEY'VE I'M YOU'RE SHE'D DON'T",
    "'s 're 've 'm 'll 'd 't",
    "don't'''",
    "café naïve résumé façade jalapeño Ångström",
    "cafe\u0301 nai\u0308ve",  # decomposed accents (NFC matters)
    "Straße, Größe, Übermaß",
    "Ça va? Où est l'hôtel?",
    "中文分词测试，这是一个句子。",
    "日本語のテキストです。カタカナとひらがな。",
    "한국어 문장입니다.",
    "Mixed 中文 and English 混合",
    "Русский текст, Ёлка.",
    "Ελληνικά γράμματα αβγ",
    "עברית וערבية",
    "हिन्दी पाठ",
    "😀😃😄",
    "family: 👨\u200d👩\u200d👧\u200d👦 and flag 🏳\ufe0f\u200d🌈",
    "👍🏽 thumbs, 👩🏿\u200d💻 coder",
    "🇫🇷🇩🇪🇯🇵",
    "1234567890",
    "3.14159265358979",
    "1,000,000 and 42 and 007",
    "phone 555-0100 ext. 12345678901234567890",
    "2026-11-29T08:00:00Z",
    "a  b   c    d",
    "     leading spaces",
    "trailing spaces     ",
    "\n",
    "\n\n\n",
    "line one\nline two\n\nline four",
    "  \n  \n",
    "\r\n windows\r\nline",
    "\ttab\tseparated\tvalues",
    "\t\t\tindented",
    "mixed \t \n whitespace \t\n",
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }",
    "x = {'a': [1, 2, 3], \"b\": None}",
    "if a != b && c >= d || !e: pass",
    "https://example.com/path?query=1&other=two#frag",
    "user@example.org",
    "<html><body class=\"x\">text</body></html>",
    "$$\\frac{a}{b} = \\sqrt{x^2 + y^2}$$",
    "!!!???...,,,;;;:::",
    "---===+++***",
    "~`@#%^&*()_+-=[]{}|\\",
    "ALLCAPS lowercase MiXeD CamelCaseWord snake_case_word",
    "a\u00a0non-breaking\u2009thin\u200bzero-width",
    "\u00bd \u2153 \u00b2 \u2460",  # fractions, superscript, circled digit
    "ﬁ ligature and ｆｕｌｌｗｉｄｔｈ",
    "The year 1999 was followed by 2000.",
    "Numbers: 1 12 123 1234 12345 123456",
    "end.",
]

FRAGMENTS = [
    "the", " cat", " sat", " on", " mat", "It's", " we'll", " don't", " café", " naïve",
    "中文", "日本", "한국", "😀", "👨\u200d👩\u200d👧", "🏳\ufe0f\u200d🌈", "12", "345", "6789",
    " ", "  ", "   ", "\n", "\n\n", "\t", "\t\t", "def", "(x)", ":", "    return", "{", "}",
    "Ñ", "ü", "ß", "é", "->", "==", "!=", "...", ",", ".", "?", "!", "'s", "'LL", "A", "Z",
]


def generated(count, seed=20261129):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(1, 12)
        out.append("".join(rng.choice(FRAGMENTS) for _ in range(n)))
    return out


def special_cases(special_tokens):
    """Strings that contain added/special tokens inside ordinary text."""
    cases = []
    for tok in special_tokens:
        cases.append(f"{tok}")
        cases.append(f"before{tok}after")
        cases.append(f"{tok} with space {tok}")
        cases.append(f"\n{tok}\n")
    return cases


def all_strings(special_tokens):
    return HAND_WRITTEN + special_cases(special_tokens) + generated(160)
