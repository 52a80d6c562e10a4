"""Tests of build_corpus.py's text extraction (python3 -m unittest tools/testbed/test_build_corpus.py)."""
import gzip
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import build_corpus  # noqa: E402

PAGE = """<html lang="en"><head><title>t</title><style>p {}</style></head><body>
<div id="hd">Home | Contents <div class="inner">nested chrome</div> still chrome</div>
<div class="section"><p>The body text stays.</p><div class="note"><p>So does a nested note.</p></div></div>
<div class="sphinxsidebar"><div><div>deep sidebar</div></div></div>
<p>After the sidebar.</p></body></html>"""


class HtmlToText(unittest.TestCase):
    def test_chrome_is_dropped_with_everything_nested_in_it(self):
        text = build_corpus.html_to_text(PAGE, chrome=("hd", "sphinxsidebar"))
        self.assertIn("The body text stays.", text)
        self.assertIn("So does a nested note.", text)
        self.assertIn("After the sidebar.", text)
        for gone in ("Home", "nested chrome", "still chrome", "deep sidebar", "p {}"):
            self.assertNotIn(gone, text)

    def test_without_chrome_the_extraction_is_the_original_one(self):
        # The sources of the shipped model are extracted without chrome: their text must not change.
        text = build_corpus.html_to_text(PAGE)
        self.assertIn("nested chrome", text)
        self.assertIn("deep sidebar", text)
        self.assertNotIn("p {}", text)  # styles are still dropped


class Documents(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text, compressed=False):
        path = os.path.join(self.dir.name, name)
        if compressed:
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

    def test_english_only_skips_pages_in_another_language(self):
        body = "<p>" + "words " * 200 + "</p>"
        self.write("a.html", f'<html lang="en-GB"><body>{body}</body></html>')
        self.write("b.html", f'<html xml:lang="pt-br" lang="pt-br"><body>{body}</body></html>')
        self.write("c.html", f"<html><body>{body}</body></html>")  # no lang: kept
        pattern = os.path.join(self.dir.name, "*.html")
        self.assertEqual(len(list(build_corpus.html_documents(pattern, english_only=True))), 2)
        self.assertEqual(len(list(build_corpus.html_documents(pattern))), 3)

    def test_compressed_text_loses_emails_and_license_tags(self):
        self.write("doc.rst.gz", ".. SPDX-License-Identifier: GPL-2.0\n\nWritten by Jane Roe <jane.roe@example.org>.\n"
                   + "Some prose. " * 60, compressed=True)
        [text] = build_corpus.gzip_text_documents(os.path.join(self.dir.name, "*.rst.gz"))
        self.assertNotIn("SPDX", text)
        self.assertNotIn("example.org", text)
        self.assertIn("Jane Roe <<email>>", text)

    def test_grouped_joins_short_documents_to_a_minimum_length(self):
        groups = list(build_corpus.grouped(["a" * 40, "b" * 40, "c" * 90, "d" * 10], 100))
        self.assertEqual([len(g) for g in groups], [40 + 2 + 40 + 2 + 90, 10])


if __name__ == "__main__":
    unittest.main()
