#!/usr/bin/env python3
"""Write the training haystack texts: real English shipped with Python (Debian's
python3.x packages, or any CPython): the docstrings of the standard library's
modules, classes and functions (read with `ast`, nothing is imported) and the
language reference topics of pydoc_data (the text behind `help('TOPIC')`).

    python3 train/make_texts.py OUT_DIR

writes OUT_DIR/train/*.txt (training haystacks) and OUT_DIR/heldout/*.txt (a
disjoint 1-in-5 share of the modules and topics, used only for the accuracy
report). Deterministic for a given Python installation. Never reads
/usr/share/common-licenses or /usr/share/doc (the evaluation's held-out texts)."""
import ast
import hashlib
import os
import re
import sys
import sysconfig

SKIP = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "site-packages", "dist-packages",
        "__pycache__", "pydoc_data", "config-3", "venv"}
MIN_DOC = 80          # characters: shorter docstrings are mostly one-liners
HELDOUT_MOD = 5       # one module (or topic) in HELDOUT_MOD is held out for the report


ASCII_MAP = {0x2018: "'", 0x2019: "'", 0x201c: '"', 0x201d: '"', 0x2013: "-", 0x2014: " - ", 0x2026: "...",
             0xa0: " ", 0x2022: "*", 0x2192: "->", 0xd7: "x"}


def to_ascii(text):
    """Common typographic characters to ASCII; any other non-ASCII character is dropped
    (the C generator drops non-ASCII bytes too)."""
    return text.translate(ASCII_MAP).encode("ascii", "ignore").decode("ascii")


# license and warranty boilerplate (some modules quote a BSD or PSF license) is left out: the
# evaluation's held-out texts are licenses
LEGAL = re.compile(r"(?i)warrant|licen[cs]|copyright|redistribut|merchantab|liabil")


def heldout(name):
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % HELDOUT_MOD == 0


def docstrings(path):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            d = ast.get_docstring(node, clean=True)
            if d:
                d = to_ascii(d)
                if len(d) >= MIN_DOC and not LEGAL.search(d):
                    out.append(d)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_texts.py OUT_DIR")
    out = sys.argv[1]
    for sub in ("train", "heldout"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    stdlib = sysconfig.get_paths()["stdlib"]
    if stdlib.startswith("/usr/share"):
        sys.exit("unexpected stdlib path " + stdlib)
    sizes = {"train": 0, "heldout": 0}
    files = []
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith(("config-", "test")))
        for n in sorted(names):
            if n.endswith(".py"):
                files.append(os.path.join(root, n))
    files.sort()
    for path in files:
        rel = os.path.relpath(path, stdlib)
        docs = docstrings(path)
        if not docs:
            continue
        text = "\n\n".join(docs) + "\n"
        sub = "heldout" if heldout(rel) else "train"
        name = "py_" + rel[:-3].replace(os.sep, ".") + ".txt"
        with open(os.path.join(out, sub, name), "w", encoding="ascii") as f:
            f.write(text)
        sizes[sub] += len(text)
    # the language reference topics (help('TOPIC')), when the installation ships them
    try:
        from pydoc_data.topics import topics
    except ImportError:
        topics = {}
    for key in sorted(topics):
        text = to_ascii(topics[key])
        if len(text) < MIN_DOC or LEGAL.search(text):
            continue
        sub = "heldout" if heldout("topic:" + key) else "train"
        safe = "".join(ch if ch.isalnum() else "_" for ch in key)
        with open(os.path.join(out, sub, "ref_" + safe + ".txt"), "w", encoding="ascii") as f:
            f.write(text)
        sizes[sub] += len(text)
    print(f"make_texts: {sizes['train']} bytes of training text, {sizes['heldout']} held out, "
          f"Python {sys.version.split()[0]} ({stdlib})", flush=True)


if __name__ == "__main__":
    main()
