"""Build the testbed's natural-text corpus from Debian packages (run on the development machine).

    apt-get install dict-gcide python3-doc debian-reference-en   # once; scripts/ does it for CI
    python3 tools/testbed/build_corpus.py OUT_DIR [--more | --most]

Writes OUT_DIR/corpus.jsonl.xz (one document per line: {"source", "text"}), OUT_DIR/heldout.jsonl.xz
(every 100th prose document, never trained on) and OUT_DIR/mixture.json (documents, characters and
share per source). Sources, all from Debian 12 packages:
  gcide        dict-gcide: the Collaborative International Dictionary of English (GPL), entries as prose
  python-docs  python3-doc: the Python 3.11 documentation, HTML to text (PSF license)
  debian-ref   debian-reference-en: the Debian Reference manual, HTML to text (GPL/MIT-style)
  python-code  python3.11's standard library sources (/usr/lib/python3.11, PSF license)
  c-headers    C/C++ headers under /usr/include (various free licenses)
With --more (apt-get install perl-doc debian-handbook git-doc postgresql-doc-15), four more prose
sources, for the next training round (the shipped model was trained without them):
  perl-doc     the Perl documentation, POD with its markup stripped (GPL/Artistic)
  handbook     The Debian Administrator's Handbook, English HTML (GPL-2+ / CC-BY-SA-3.0)
  git-doc      Git's manual pages and guides, AsciiDoc text (GPL-2)
  pg-doc       the PostgreSQL 15 manual, HTML (PostgreSQL license)
With --most (also apt-get install linux-doc-6.1 nodejs-doc apache2-doc debian-policy rust-doc
python-django-doc exim4-doc-html libreoffice-help-en-us), the --more sources and eight more (the
shipped model has not seen them):
  kernel-doc   the Linux 6.1 kernel documentation, reStructuredText and text (GPL-2; translations
               skipped, e-mail addresses replaced by <email>)
  node-doc     the Node.js API documentation, Markdown (MIT)
  apache-doc   the Apache HTTP Server 2.4 manual, English HTML (Apache-2.0)
  policy       the Debian Policy Manual and its companion documents, text (GPL-2+)
  rust-books   the Rust books of rust-doc: The Book, the Reference, the Nomicon, Rust by Example,
               the edition guide, the embedded book, the rustc and rustdoc books (MIT/Apache-2.0)
  django-doc   the Django 3.2 documentation, HTML without its site chrome (BSD-3-Clause)
  exim-spec    the Exim 4 specification, HTML (GPL-2+)
  libreoffice-help  LibreOffice's English help pages, joined into documents of ≥ 20,000
               characters (MPL-2.0)
The procedural long-context part of the mixture is generated at training time (procedural.py).
"""
import glob
import gzip
import html
import html.parser
import itertools
import json
import lzma
import os
import re
import sys


class _TextExtractor(html.parser.HTMLParser):
    """Visible text of an HTML page: paragraphs kept, scripts, styles and navigation dropped."""
    SKIP = {"script", "style", "nav", "head"}
    BLOCK = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "pre", "tr", "dt", "dd", "section", "table"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skipping = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)


class _PageBodyExtractor(_TextExtractor):
    """_TextExtractor that also drops a page's chrome: any element whose id or class is listed
    (a site header, sidebars, footers), with everything nested in it."""

    def __init__(self, chrome):
        super().__init__()
        self.chrome, self.chrome_tag, self.chrome_depth = set(chrome), None, 0

    def handle_starttag(self, tag, attrs):
        if self.chrome_tag is not None:
            self.chrome_depth += tag == self.chrome_tag
            return
        names = {value for key, value in attrs if key == "id" and value}
        names |= {c for key, value in attrs if key == "class" and value for c in value.split()}
        if names & self.chrome:
            self.chrome_tag, self.chrome_depth = tag, 1
            return
        super().handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if self.chrome_tag is not None:
            if tag == self.chrome_tag:
                self.chrome_depth -= 1
                if self.chrome_depth == 0:
                    self.chrome_tag = None
            return
        super().handle_endtag(tag)

    def handle_data(self, data):
        if self.chrome_tag is None:
            super().handle_data(data)


def html_to_text(markup, chrome=()):
    parser = _PageBodyExtractor(chrome) if chrome else _TextExtractor()
    parser.feed(markup)
    text = "".join(parser.parts)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def gcide_documents():
    """Dictionary entries, grouped ~40 at a time into documents; markup and source tags removed."""
    raw = gzip.open("/usr/share/dictd/gcide.dict.dz").read().decode("utf-8", "replace")
    entries = re.split(r"\n(?=[A-Z][^\n]{0,60}\\)", raw)
    batch = []
    for entry in entries:
        entry = re.sub(r"\[(1913 Webster|PJC|WordNet 1.5|Century Dict.|Webster 1913 Suppl.)[^\]]*\]", "", entry)
        entry = re.sub(r"[ \t]+", " ", entry)
        entry = re.sub(r"\n ", "\n", entry)
        entry = re.sub(r"\n{2,}", "\n", entry).strip()
        if len(entry) > 40:
            batch.append(entry)
        if len(batch) == 40:
            yield "\n\n".join(batch)
            batch = []
    if batch:
        yield "\n\n".join(batch)


HTML_LANGUAGE = re.compile(r"<html[^>]*\blang=\"([^\"]*)\"", re.I)


def html_documents(pattern, chrome=(), skip=(), min_chars=500, english_only=False):
    """Visible text of each HTML page; `chrome`: ids/classes of page furniture to drop; `skip`:
    path parts whose pages are left out (old editions, redirect stubs); english_only: pages whose
    <html lang> names another language are left out (a manual's untranslated fallbacks)."""
    for path in sorted(glob.glob(pattern, recursive=True)):
        if any(part in path for part in skip):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                markup = f.read()
        except OSError:
            continue
        language = HTML_LANGUAGE.search(markup)
        if english_only and language and not language.group(1).lower().startswith("en"):
            continue
        try:
            text = html_to_text(markup, chrome)
        except ValueError:
            continue
        if len(text) > min_chars:
            yield text


def grouped(documents, min_chars):
    """Consecutive short documents (help pages) joined until each is at least min_chars long."""
    batch, size = [], 0
    for text in documents:
        batch.append(text)
        size += len(text)
        if size >= min_chars:
            yield "\n\n".join(batch)
            batch, size = [], 0
    if batch:
        yield "\n\n".join(batch)


def pod_documents(pattern):
    """Perl POD: directives and formatting codes removed, paragraphs kept."""
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        text = re.sub(r"^=(?:pod|cut|begin|end|for|encoding|over|back)\b.*$", "", text, flags=re.M)
        text = re.sub(r"^=(?:head\d|item)\s*", "", text, flags=re.M)
        text = re.sub(r"[BCIFLSEXZ]<<+\s*(.*?)\s*>>+", r"\1", text)
        text = re.sub(r"[BCIFLSEXZ]<([^<>]*)>", r"\1", text)
        text = re.sub(r"\n{3,}", "\n\n", text).strip()
        if len(text) > 500:
            yield text


def text_documents(pattern):
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().strip()
        if len(text) > 500:
            yield text


# The Rust project's books in rust-doc (its API reference, std/core/alloc, is left out: generated).
RUST_BOOKS = ("book", "reference", "nomicon", "rust-by-example", "edition-guide", "embedded-book", "rustc", "rustdoc")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def gzip_text_documents(pattern, skip=None):
    """Compressed text files (reStructuredText, Markdown, plain text), e-mail addresses replaced."""
    for path in sorted(glob.glob(pattern, recursive=True)):
        if skip and skip in path:
            continue
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except (OSError, EOFError):
            continue
        text = EMAIL.sub("<email>", text)
        text = re.sub(r"^\.\. SPDX-License-Identifier:.*\n", "", text, flags=re.M).strip()
        if len(text) > 500:
            yield text


def source_documents(patterns, max_bytes):
    total = 0
    for pattern in patterns:
        for path in sorted(glob.glob(pattern, recursive=True)):
            if total >= max_bytes:
                return
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            if 300 < len(text) < 200_000:
                total += len(text)
                yield text


def main():
    out_dir = sys.argv[1]
    most = "--most" in sys.argv[2:]
    more = most or "--more" in sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    sources = [
        ("gcide", gcide_documents()),
        ("python-docs", html_documents("/usr/share/doc/python3.11-doc/html/**/*.html")),
        ("debian-ref", html_documents("/usr/share/debian-reference/**/*.en.html")),
        ("python-code", source_documents(["/usr/lib/python3.11/**/*.py"], 12_000_000)),
        ("c-headers", source_documents(["/usr/include/**/*.h"], 5_000_000)),
    ]
    if more:
        sources += [
            ("perl-doc", pod_documents("/usr/share/perl/5.*/pod/*.pod")),
            ("handbook", html_documents("/usr/share/doc/debian-handbook/html/en-US/*.html")),
            ("git-doc", text_documents("/usr/share/doc/git-doc/*.txt")),
            ("pg-doc", html_documents("/usr/share/doc/postgresql-doc-15/html/*.html")),
        ]
    if most:
        kernel = "/usr/share/doc/linux-doc-6.1/Documentation/**/"
        sources += [
            ("kernel-doc", itertools.chain(gzip_text_documents(kernel + "*.rst.gz", skip="/translations/"),
                                           gzip_text_documents(kernel + "*.txt.gz", skip="/translations/"))),
            ("node-doc", gzip_text_documents("/usr/share/doc/nodejs/api/*.md.gz")),
            ("apache-doc", html_documents("/usr/share/doc/apache2-doc/manual/en/**/*.html", english_only=True,
                                          chrome=("page-header", "path", "quickview", "footer", "up", "top", "toplang", "bottomlang"))),
            ("policy", gzip_text_documents("/usr/share/doc/debian-policy/*.txt.gz")),
            ("rust-books", (re.sub(r"^Light \(default\)\s+Rust\s+Coal\s+Navy\s+Ayu\s+", "", text)
                            for book in RUST_BOOKS
                            for text in html_documents(f"/usr/share/doc/rust-doc/html/{book}/**/*.html",
                                                       skip=("/2018-edition/", "/first-edition/")))),
            ("django-doc", html_documents("/usr/share/doc/python-django-doc/html/**/*.html",
                                          chrome=("hd", "ft", "sidebar", "global-nav", "nav", "sphinxsidebar"),
                                          skip=("/_modules/", "/genindex", "/py-modindex", "/search.html"))),
            ("exim-spec", html_documents("/usr/share/doc/exim4-doc-html/spec_html/*.html",
                                         chrome=("header", "nav_flow", "toc", "footer", "left_bar", "right_bar",
                                                 "previous_page", "next_page"))),
            ("libreoffice-help", grouped((re.sub(r"^LibreOffice [\d.]+ Help\s+Module\s+Contents\s+Index\s*\S*\s+", "", t)
                                          for t in html_documents("/usr/share/libreoffice/help/en-US/text/**/*.html",
                                                                  min_chars=200)), 20_000)),
        ]
    mixture = {}
    prose_index = 0
    with lzma.open(os.path.join(out_dir, "corpus.jsonl.xz"), "wt", encoding="utf-8", preset=6) as train, \
            lzma.open(os.path.join(out_dir, "heldout.jsonl.xz"), "wt", encoding="utf-8", preset=6) as heldout:
        for name, documents in sources:
            stats = mixture.setdefault(name, {"documents": 0, "characters": 0, "heldout_documents": 0})
            for text in documents:
                line = json.dumps({"source": name, "text": text}, ensure_ascii=False) + "\n"
                is_prose = name not in ("python-code", "c-headers")
                if is_prose:
                    prose_index += 1
                if is_prose and prose_index % 100 == 0:
                    heldout.write(line)
                    stats["heldout_documents"] += 1
                    continue
                train.write(line)
                stats["documents"] += 1
                stats["characters"] += len(text)
            print(f"{name}: {stats}", flush=True)
    total = sum(s["characters"] for s in mixture.values())
    for s in mixture.values():
        s["share"] = round(s["characters"] / total, 4)
    with open(os.path.join(out_dir, "mixture.json"), "w") as f:
        json.dump({"total_characters": total, "sources": mixture}, f, indent=2)
    print(f"total {total / 1e6:.1f} M characters")


if __name__ == "__main__":
    main()
