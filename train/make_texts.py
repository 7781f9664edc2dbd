#!/usr/bin/env python3
"""Write the training haystack texts: real English shipped with Python (Debian's
python3.x packages, or any CPython): the docstrings of the standard library's
modules, classes and functions (read with `ast`, nothing is imported) and the
language reference topics of pydoc_data (the text behind `help('TOPIC')`); and,
since session 31, the prose of two Debian documentation packages when installed:
Python's manuals (python3.11-doc: the reStructuredText sources under
/usr/share/doc/python3.X/html/_sources) and Perl's (perl-doc: the POD files under
/usr/share/perl/5.X/pod), markup stripped and code left out. Those make the text
~6 times larger: 1.5 MB of docstrings is small enough for the 7.3M target to
learn by heart (run 12's language-model loss: 4.4 nats on its training texts, 7.0
on held-out ones), and then a memorised continuation, not a lookup, answers qa.

    python3 train/make_texts.py OUT_DIR [--docs=auto|none|require]

(--docs=none: the docstrings and topics alone, the texts of runs 1-12; require: fail
without both packages, as train.py asks)

writes OUT_DIR/train/*.txt (training haystacks) and OUT_DIR/heldout/*.txt (a
disjoint 1-in-5 share of the modules and topics, used only for the accuracy
report). Deterministic for a given Python installation. Never reads
/usr/share/common-licenses or /usr/share/doc (the evaluation's held-out texts)."""
import ast
import glob
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


RST_KEEP = {"note", "warning", "versionadded", "versionchanged", "deprecated", "seealso", "function", "method",
            "class", "attribute", "data", "exception", "describe", "decorator", "classmethod", "staticmethod",
            "impl-detail", "admonition", "important", "tip", "attention", "caution", "hint", "opcode", "cmdoption",
            "option", "envvar", "index", "glossary", "rubric", "topic", "sidebar", "abstractmethod", "coroutinefunction",
            "coroutinemethod", "decoratormethod", "availability"}
ROLE = re.compile(r":[\w:+-]+:`([^`]*)`")
LINK = re.compile(r"`([^`<]*?)\s*(?:<[^>`]*>)?`__?")


def _inline_rst(t):
    def role(m):
        x = m.group(1)
        x = re.sub(r"\s*<[^>]*>$", "", x) or x
        return x.lstrip("~!")
    t = ROLE.sub(role, t)
    t = re.sub(r"\[#[^\]]*\]_", "", t)
    t = t.replace("``", "")
    t = LINK.sub(lambda m: m.group(1), t)
    t = re.sub(r"\*\*([^*]+)\*\*", r"\1", t)
    t = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*", r"\1", t)
    t = t.replace("\\ ", "").replace("\\", "")
    return re.sub(r"\s+", " ", t).strip()


def prose_paragraphs(paras, min_words=8):
    """Paragraphs of prose: enough words, not mostly symbols, no license language."""
    out = []
    for p in paras:
        p = to_ascii(p).strip()
        words = p.split()
        if len(words) < min_words or LEGAL.search(p):
            continue
        alpha = sum(ch.isalpha() or ch == " " for ch in p)
        if alpha < 0.8 * len(p):
            continue
        out.append(p)
    return out


def rst_prose(text):
    """The prose paragraphs of a reStructuredText source: headings, directives' prose content
    (function descriptions, notes), body text; literal blocks, doctests, tables and directive
    options left out; inline markup stripped."""
    paras, cur = [], []
    skip = None   # skipping an indented block deeper than this indent

    def flush():
        if cur:
            paras.append(_inline_rst(" ".join(cur)))
            cur.clear()
    for line in text.split("\n"):
        s = line.rstrip()
        st = s.strip()
        ind = len(s) - len(s.lstrip())
        if skip is not None:
            if not st or ind > skip:
                continue
            skip = None
        if not st:
            flush()
            continue
        if re.fullmatch(r"([=\-~^*#+\"'`:.])\1{2,}", st) or re.fullmatch(r"[= ]+", st) or st[0] in "+|":
            flush()   # heading underlines, table borders and rows
            continue
        if st == ".." or st.startswith(".. "):
            flush()
            m = re.match(r"\.\. ([\w:-]+)::", st)
            name = m.group(1).split(":")[-1] if m else ""
            if name not in RST_KEEP:
                skip = ind   # code blocks, toctrees, comments, images, module headers...
            continue
        if st.startswith((">>>", "...")) or re.match(r":[\w -]+:( |$)", st):
            continue
        if st.endswith("::"):
            cur.append(st[:-1].rstrip(":") if st != "::" else "")
            flush()
            skip = ind
            continue
        cur.append(st)
    flush()
    return prose_paragraphs(paras)


POD_CODE = re.compile(r"([A-Z])<(?:<+\s(.*?)\s>+|([^<>]*))>", re.S)


def _inline_pod(t):
    def code(m):
        kind, x = m.group(1), m.group(2) if m.group(2) is not None else m.group(3)
        if kind in "XZ":
            return ""
        if kind == "E":
            return {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}.get(x, "")
        if kind == "L":
            if "|" in x:
                x = x.split("|", 1)[0]
            elif "://" not in x:
                x = x.split("/", 1)[0] or x.replace("/", "").strip('"')
        return x
    for _ in range(4):   # nested codes, innermost first
        t2 = POD_CODE.sub(code, t)
        if t2 == t:
            break
        t = t2
    return re.sub(r"\s+", " ", t).strip()


def pod_prose(text):
    """The prose paragraphs of a POD file: headings and items as their own paragraphs, ordinary
    paragraphs; verbatim (indented) paragraphs and =begin/=for blocks left out."""
    paras, in_block = [], False
    for p in re.split(r"\n\s*\n", text):
        if not p.strip():
            continue
        if p.startswith("="):
            cmd, _, rest = p.partition(" ")
            if cmd == "=begin":
                in_block = True
            elif cmd == "=end":
                in_block = False
            elif cmd in ("=head1", "=head2", "=head3", "=head4", "=item") and not in_block:
                paras.append(_inline_pod(rest.strip().lstrip("*").strip()))
            continue
        if in_block or p[0] in " \t":
            continue
        paras.append(_inline_pod(p))
    return prose_paragraphs(paras)


ROFF_ESC = [(re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\\((em|en)"), " - "),
            (re.compile(r"\\\((aq|cq|oq)"), "'"), (re.compile(r"\\\((lq|rq|dq)"), '"'),
            (re.compile(r"\\\[(em|en)\]"), " - "), (re.compile(r"\\\[(aq|cq|oq)\]"), "'"),
            (re.compile(r"\\\[(lq|rq|dq)\]"), '"'), (re.compile(r"\\[-e]"), lambda m: "-" if m.group(0)[1] == "-" else "\\"),
            (re.compile(r"\\\*(\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\(\(..|\[[^\]]*\])"), ""),
            (re.compile(r"\\[&|^%c:]"), ""), (re.compile(r"\\[ ~0]"), " "),
            (re.compile(r"\\[sv]['\[(]?[-+]?\d*\]?'?"), ""), (re.compile(r"\\."), "")]
MAN_SKIP = {"SYNOPSIS", "COPYRIGHT", "COLOPHON", "SEE ALSO", "AUTHOR", "AUTHORS", "LICENSE", "REPORTING BUGS"}


def _inline_roff(t):
    for pat, rep in ROFF_ESC:
        t = pat.sub(rep, t)
    return re.sub(r"\s+", " ", t).strip()


def man_prose(text):
    """The prose paragraphs of a man page (roff, man macros): body text and the text of font
    macros (.B, .BR, ...); comments, no-fill and example blocks (.nf/.fi, .EX/.EE), tables
    (.TS/.TE), other requests and the SYNOPSIS, SEE ALSO and copyright sections left out;
    escapes stripped."""
    paras, cur, block, section = [], [], None, ""

    def flush():
        if cur:
            paras.append(_inline_roff(" ".join(cur)))
            cur.clear()
    lines = text.replace("\\\n", "").split("\n")
    for line in lines:
        if line.startswith((".\\\"", "'\\\"", "\\\"")):
            continue
        if line.startswith((".", "'")):
            m = re.match(r"[.']\s*(\S+)\s*(.*)", line)
            if not m:
                continue
            mac, rest = m.group(1), m.group(2)
            if block:
                if mac == block:
                    block = None
                continue
            if mac in ("nf", "EX", "TS"):
                flush()
                block = {"nf": "fi", "EX": "EE", "TS": "TE"}[mac]
            elif mac in ("SH", "SS"):
                flush()
                head = _inline_roff(rest.replace('"', ""))
                if mac == "SH":
                    section = head.upper()
            elif section in MAN_SKIP:
                continue
            elif mac in ("B", "I", "SM", "SB"):
                cur.append(rest.replace('"', ""))
            elif mac in ("BR", "RB", "IR", "RI", "BI", "IB"):
                cur.append("".join(a for a in re.findall(r'"([^"]*)"|(\S+)', rest) for a in a if a))
            elif mac in ("PP", "P", "LP", "TP", "IP", "HP", "RS", "RE", "sp", "in", "TQ"):
                flush()
            continue
        if block or section in MAN_SKIP:
            continue
        if not line.strip():
            flush()
            continue
        cur.append(line)
    flush()
    return prose_paragraphs(paras)


def man_files():
    """The man pages of Debian's manpages and manpages-dev packages (the Linux man-pages project):
    English, sections 2-8, as `dpkg -L` lists them (None when either package is missing)."""
    import subprocess
    try:
        listing = subprocess.run(["dpkg", "-L", "manpages", "manpages-dev"], capture_output=True, text=True,
                                 check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted(p for p in listing.split("\n")
                  if re.fullmatch(r"/usr/share/man/man\d/[^/]+\.gz", p) and os.path.isfile(p) and not os.path.islink(p))


def kernel_doc_files():
    """The kernel's documentation sources in Debian's linux-doc-6.x package (reStructuredText and
    plain text, gzipped, under /usr/share/doc/linux-doc-6.x/Documentation), translations and the
    ABI, device-tree, feature and litmus-test listings (structured, not prose) left out."""
    roots = sorted(glob.glob("/usr/share/doc/linux-doc-6.*/Documentation"))
    if not roots:
        return None
    root, files = roots[-1], []
    skip = {"translations", "ABI", "devicetree", "features", "litmus-tests", "sphinx", "sphinx-static", "images"}
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (dirpath == root and d in skip))
        files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith((".rst.gz", ".txt.gz"))]
    return [(root, f) for f in sorted(files)]


def write_extra(out, sizes, kind):
    """One output file per man page (kind "man") or kernel document ("kernel"), held out 1 in
    HELDOUT_MOD by name as the rest."""
    import gzip
    n = 0
    items = [(os.path.dirname(p), p) for p in man_files() or []] if kind == "man" else kernel_doc_files() or []
    for root, path in items:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            paras = (man_prose if kind == "man" else rst_prose)(f.read())
        if not paras:
            continue
        text = "\n\n".join(paras) + "\n"
        name = os.path.relpath(path, root)[:-len(".gz")]
        sub = "heldout" if heldout(f"{kind}:{name}") else "train"
        safe = "".join(ch if ch.isalnum() or ch in "._" else "_" for ch in name)
        with open(os.path.join(out, sub, f"{kind}_{safe}.txt"), "w", encoding="ascii") as f:
            f.write(text)
        sizes[sub] += len(text)
        n += 1
    return n


def doc_sources():
    """(kind, root) of the installed documentation packages: Python's manuals, Perl's PODs."""
    out = []
    py = sorted(d for d in glob.glob("/usr/share/doc/python3.*/html/_sources") if os.path.isdir(d))
    if py:
        out.append(("python", py[-1]))
    pl = sorted(d for d in glob.glob("/usr/share/perl/5.*/pod") if os.path.isdir(d))
    if pl:
        out.append(("perl", pl[-1]))
    return out


POD_SKIP = {"perlartistic.pod", "perlgpl.pod"}   # license texts (/usr/share/common-licenses has both)


def write_docs(out, sizes):
    """The documentation packages' prose, one output file per source file; held out as the
    docstrings are (library/X.rst with module X, so a held-out module's manual page is held out too)."""
    n = 0
    for kind, root in doc_sources():
        files = []
        for dirpath, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                if kind == "python" and name.endswith(".rst.txt") or kind == "perl" and name.endswith(".pod"):
                    files.append(os.path.join(dirpath, name))
        for path in sorted(files):
            rel = os.path.relpath(path, root)
            if kind == "perl" and os.path.basename(rel) in POD_SKIP or rel.startswith(("license", "copyright")):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                paras = (rst_prose if kind == "python" else pod_prose)(f.read())
            if not paras:
                continue
            text = "\n\n".join(paras) + "\n"
            held = heldout(f"{kind}:{rel}")
            if kind == "python" and rel.startswith("library/"):
                mod = rel[len("library/"):-len(".rst.txt")]
                held = held or heldout(mod.replace(".", os.sep) + ".py") or \
                    heldout(os.path.join(mod.replace(".", os.sep), "__init__.py"))
            sub = "heldout" if held else "train"
            stem = rel[:-len(".rst.txt")] if kind == "python" else rel[:-len(".pod")]
            safe = "".join(ch if ch.isalnum() or ch in "._" else "_" for ch in stem)
            with open(os.path.join(out, sub, f"doc_{kind}_{safe}.txt"), "w", encoding="ascii") as f:
                f.write(text)
            sizes[sub] += len(text)
            n += 1
    return n


def main():
    args = [x for x in sys.argv[1:] if not x.startswith(("--docs", "--extra"))]
    mode, extra = "auto", []
    for x in sys.argv[1:]:
        if x.startswith("--docs"):
            mode = x.partition("=")[2]
        elif x.startswith("--extra="):
            extra = [e for e in x.partition("=")[2].split(",") if e]
    if len(args) != 1 or mode not in ("auto", "none", "require") or any(e not in ("man", "kernel") for e in extra):
        sys.exit("usage: make_texts.py OUT_DIR [--docs=auto|none|require] [--extra=man,kernel]")
    out = args[0]
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
    if mode != "none" and any(k == "python" for k, _ in doc_sources()):
        topics = {}   # the manuals hold the same text (the topics are cut from them), held out by file
    for key in sorted(topics):
        text = to_ascii(topics[key])
        if len(text) < MIN_DOC or LEGAL.search(text):
            continue
        sub = "heldout" if heldout("topic:" + key) else "train"
        safe = "".join(ch if ch.isalnum() else "_" for ch in key)
        with open(os.path.join(out, sub, "ref_" + safe + ".txt"), "w", encoding="ascii") as f:
            f.write(text)
        sizes[sub] += len(text)
    n_docs = 0
    if mode != "none":
        if mode == "require" and len(doc_sources()) < 2:
            sys.exit("make_texts: --docs=require: python3.11-doc and perl-doc are not both installed "
                     "(apt-get install python3.11-doc perl-doc)")
        n_docs = write_docs(out, sizes)
    n_extra = {}
    for e in extra:
        if not (man_files() if e == "man" else kernel_doc_files()):
            sys.exit(f"make_texts: --extra={e}: " + ("manpages and manpages-dev are not installed (apt-get install "
                     "manpages manpages-dev)" if e == "man" else "linux-doc-6.x is not installed (apt-get install "
                     "linux-doc-6.1)"))
        n_extra[e] = write_extra(out, sizes, e)
    print(f"make_texts: {sizes['train']} bytes of training text, {sizes['heldout']} held out, "
          f"{', '.join(f'{v} {k} files' for k, v in n_extra.items()) or 'no extra files'}, "
          f"Python {sys.version.split()[0]} ({stdlib}), {n_docs} documentation files "
          f"({', '.join(r for _, r in doc_sources()) if mode != 'none' else 'not used'})", flush=True)


if __name__ == "__main__":
    main()
