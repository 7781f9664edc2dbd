"""The guided-regex DFA (src/structured/regex.c) against Python's re.

usage: check_regex_ref.py OKV_REGEX_CHECK [SEED]

For each pattern below, texts: random strings over the pattern's own characters plus noise
(ASCII, multi-byte UTF-8 at each encoding length and its edges, and invalid UTF-8: stray
continuation bytes, overlong forms, surrogates, past U+10FFFF, truncated sequences), random
full matches that the C side walks through its DFA, mutations of those (a byte or character
deleted, inserted or replaced) and a few hand-written ones. The reference is
re.fullmatch(pattern, text.decode("utf-8"), re.ASCII) (False when the bytes are not UTF-8):
re.ASCII because the C side takes \\d \\w \\s as the ASCII sets, which is what that flag means.
For every text:
  - the DFA's verdict (full match or not) equals Python's;
  - a prefix the DFA takes is viable: the C side names a completion for it (a shortest path to
    an accepting state) and Python must fully match prefix + completion; this covers every
    prefix of every Python match, which therefore never hits -1;
  - where the DFA refuses byte N, no Python match among the texts starts with bytes 0..N.
Patterns outside the subset must be refused with an error that names the construct; syntax
errors that Python also refuses must be refused too."""
import random
import re
import subprocess
import sys
import time

PATTERNS = [
    r'abc', r'a|b|', r'a*', r'a+b?', r'(ab|a)(c|bcd)(d*)', r'x{3}', r'x{2,4}', r'x{2,}', r'x{,3}',
    r'(?:ab){1,3}c', r'[a-c]+[^a-c]*', r'\d+(\.\d+)?', r'-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?',
    r'\w+@\w+\.(com|org)', r'\s*\S+\s*', r'\W\D', r'.', r'.*', r'.+x', r'[^x]{2}', 'é+', '[à-ÿ]+',
    '[一-龥]{1,3}', '[^一-龥a]*', '(😀|中文)+', r'[\u0100-\u07ff\U00010000-\U0010ffff]', r'[\x00-\x7f]*',
    '(a|é|中|😀)*z', r'ab*?c', r'a+?b??', r'^(yes|no)$', r'\{"a": \d+\}', r'a{', r'{}a', r'x{1,2',
    r'[]a]+', r'[-a]', r'[a-]', r'[\]\\]+', r'[\d\s]+', r'[^\W\d]+', r'(?P<n>ab)+', r'(?#comment)abc',
    r'(a*)*b', r'(a|b)*a(a|b){3}', r'\n\t\r\f\v', r'\x41\u00e9\U0001F600', r'a\.b\*c\/\-',
    r'true|false|null', r'[+-]?\d{1,3}(,\d{3})*', r'(?:[A-Z][a-z]+ ){1,3}[A-Z][a-z]+', r'[\x80-\U0010ffff]+',
    r'.\n', r'[^\n]*\n', r'[߿-ࠀ￿-𐀀]+', r'(|a)(b|)', r'a{0}b', r'(ab){0,2}?', '[\U0010fffe-\U0010ffff\u07ff]*',
]

# (pattern, what the error must say)
REFUSED = [
    (r'(?=a)', 'lookahead'), (r'a(?!b)', 'negative lookahead'), (r'(?<=a)b', 'lookbehind'),
    (r'(?<!a)b', 'negative lookbehind'), (r'(a)\1', 'backreference'), (r'(?P<x>a)(?P=x)', 'backreference'),
    (r'(?i)a', 'inline flags'), (r'a(?s:.)', 'inline flags'), (r'\bword', r'\b'), (r'a\B', r'\B'), (r'\Aa', r'\A'),
    (r'a\Z', r'\Z'), (r'a*+', 'possessive'), (r'(?>a)', 'atomic'), (r'a{1001}', '1000'), (r'a{2,5000}', '1000'),
    (r'a^b', '^'), (r'a$b', '$'), (r'(^a)*', '^'), (r'(?(1)a|b)', 'conditional'), (r'\N{DIGIT ONE}', r'\N'),
    (r'.{0,1000}', 'DFA states'), (r'[^\s\S]', 'matches no text'), ('\\\udcff', 'invalid UTF-8'), ('a\udcff', 'invalid UTF-8'),
]
# syntax errors: Python refuses them too
SYNTAX = [
    (r'(ab', 'missing )'), (r'ab)', 'unbalanced'), (r'[ab', 'unterminated'), (r'*a', 'nothing to repeat'),
    (r'a|+', 'nothing to repeat'), (r'a**', 'multiple repeat'), (r'a{3,2}', 'min repeat'), (r'[z-a]', 'bad character range'),
    (r'[\d-z]', 'bad character range'), (r'\q', r'bad escape \q'), ('a\\', 'trailing backslash'), (r'{2}', 'nothing to repeat'),
    (r'(?P<1>a)', 'group name'), (r'(?<n>a)', 'unknown'),
]

NOISE = ['a', 'b', 'x', 'z', 'A', 'Z', '0', '5', '9', ' ', '\n', '\t', '_', '-', '.', '+', ',', '@', '{', '}', '"',
         'é', 'ÿ', 'à', '\u0100', '\u07ff', '\u0800', '中', '文', '一', '龥', '\uffff', '\U00010000', '😀',
         '\U0010ffff', '\x00', '\x7f', '\x80', '\u0663', '\u00a0', '\u2028', '\x1c', 'ß']   # the last five: \d \s \w only without re.ASCII
BAD = [b'\x80', b'\xbf', b'\xc0\xaf', b'\xc1\xbf', b'\xe0\x80\x80', b'\xed\xa0\x80', b'\xf4\x90\x80\x80', b'\xf5\x80\x80\x80',
       b'\xe4\xb8', b'\xf0\x9f\x98', b'\xc3', b'\xff', b'\xfe']
HAND = {
    r'-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?': ['0', '-0', '12.5e-3', '01', '1.', '-', '3E+7'],
    r'\w+@\w+\.(com|org)': ['me@x.com', 'a_b@c9.org', 'me@x.net', 'me@.com'],
    r'[+-]?\d{1,3}(,\d{3})*': ['1,000', '+12,345,678', '1,00', '1234'],
    r'\{"a": \d+\}': ['{"a": 1}', '{"a": }', '{"a": 12}'],
    r'(?:[A-Z][a-z]+ ){1,3}[A-Z][a-z]+': ['Ab Cd', 'Ab Cd Ef Gh', 'Ab Cd Ef Gh Ij', 'Ab'],
}


def pymatch(rx, b):
    try:
        s = b.decode('utf-8')
    except UnicodeDecodeError:
        return False
    return rx.fullmatch(s) is not None


def run_tool(tool, pattern, args=(), lines=()):
    r = subprocess.run([tool, pattern.encode('utf-8', 'surrogatepass').hex(), *args], input=''.join(
        (x.hex() or '-') + '\n' for x in lines), capture_output=True, text=True)
    return r.returncode, r.stdout.splitlines()


def pattern_alphabet(pattern):
    return [c for c in set(pattern) if c not in '\\()[]{}|*+?^$']


def rand_text(rng, alpha):
    out = bytearray()
    for _ in range(rng.randint(0, 12)):
        k = rng.random()
        if k < 0.55 and alpha:
            out += rng.choice(alpha).encode()
        elif k < 0.9:
            out += rng.choice(NOISE).encode()
        else:
            out += rng.choice(BAD)
    return bytes(out)


def mutate(rng, b, alpha):
    i = rng.randint(0, len(b))
    k = rng.randint(0, 4)
    piece = rng.choice([rng.choice(alpha or NOISE).encode(), rng.choice(NOISE).encode(), rng.choice(BAD)])
    if k == 0 and b:
        return b[:i] + b[i + 1:]
    if k == 1:
        return b[:i] + piece + b[i:]
    if k == 2 and b:
        return b[:i] + piece + b[i + 1:]
    if k == 3:   # a whole character out, where the text is UTF-8
        try:
            s = b.decode('utf-8')
        except UnicodeDecodeError:
            return b[:i]
        j = rng.randint(0, len(s))
        return (s[:j] + s[j + 1:]).encode()
    return b[:i]   # a prefix


def check_pattern(tool, pattern, rng, stats):
    fails = []
    rx = re.compile(pattern, re.ASCII)
    seed = rng.randint(0, 10**6)
    rc, out = run_tool(tool, pattern, ['--walk', '60', str(seed)])
    if rc != 0 or not out or not out[0].startswith('states '):
        return [f'{pattern!r}: compile: rc {rc}: {out[:2]}']
    walks = [bytes.fromhex(x) if x != '-' else b'' for x in out[1:]]
    for w in walks:
        if not pymatch(rx, w):
            fails.append(f'{pattern!r}: a DFA walk {w!r} does not fullmatch in Python')
    alpha = pattern_alphabet(pattern)
    texts = set(walks)
    texts.update(x.encode() for x in HAND.get(pattern, []))
    for _ in range(250):
        texts.add(rand_text(rng, alpha))
    for _ in range(250):
        if walks:
            texts.add(mutate(rng, rng.choice(walks), alpha))
    texts = sorted(texts)
    rc, out = run_tool(tool, pattern, [], texts)
    if rc != 0 or len(out) != len(texts) + 1:
        return fails + [f'{pattern!r}: check run: rc {rc}, {len(out)} lines for {len(texts)} texts']
    verdict = {}
    for b, line in zip(texts, out[1:]):
        f = line.split()
        if f[0] == 'fail':
            verdict[b] = ('fail', int(f[1]), f[2:])
        else:
            verdict[b] = (f[0], len(b), f[1:])
    matches = [b for b in texts if pymatch(rx, b)]
    match_set = set(matches)
    match_prefixes = {m[:k] for m in matches for k in range(len(m) + 1)}
    seen = set()
    for b in texts:
        kind, n, wit = verdict[b]
        py = b in match_set
        stats['texts'] += 1
        stats['matches'] += py
        if (kind == 'match') != py:
            fails.append(f'{pattern!r} on {b!r}: C says {kind} {n}, Python {"matches" if py else "does not"}')
        if len(wit) != n + 1:
            fails.append(f'{pattern!r} on {b!r}: {len(wit)} witnesses for {n + 1} prefixes')
            continue
        for k, w in enumerate(wit):
            full = b[:k] + (bytes.fromhex(w) if w != '-' else b'')
            if full in seen:
                continue
            seen.add(full)
            stats['witnesses'] += 1
            if not pymatch(rx, full):
                fails.append(f'{pattern!r}: prefix {b[:k]!r} taken by the DFA, but its completion {full!r} '
                             'does not fullmatch in Python')
        if kind == 'fail':
            stats['refused'] += 1
            if b[:n + 1] in match_prefixes:
                fails.append(f'{pattern!r} on {b!r}: the DFA refuses byte {n}, but a Python match starts with {b[:n + 1]!r}')
    return fails


def main():
    tool = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time()) % 100000
    print(f'seed {seed} (check_regex_ref.py TOOL {seed} repeats this run)')
    rng = random.Random(seed)
    stats = {'texts': 0, 'matches': 0, 'witnesses': 0, 'refused': 0}
    fails = []
    for p in PATTERNS:
        fails += check_pattern(tool, p, rng, stats)
    n_err = 0
    for p, what in REFUSED + SYNTAX:
        rc, out = run_tool(tool, p)
        n_err += 1
        if rc != 3 or not out or not out[0].startswith('error: '):
            fails.append(f'{p!r}: compiled (rc {rc}: {out[:1]}); it must be refused')
        elif what is not None and what not in out[0]:
            fails.append(f'{p!r}: the error {out[0]!r} does not name {what!r}')
    for p, _ in SYNTAX:
        try:
            re.compile(p)
            fails.append(f'{p!r}: listed as a syntax error, but Python compiles it')
        except re.error:
            pass
    for f in fails[:40]:
        print('FAIL', f)
    print(f'{len(PATTERNS)} patterns, {stats["texts"]} texts ({stats["matches"]} Python matches, {stats["refused"]} '
          f'refused by the DFA at some byte), {stats["witnesses"]} completions checked, {n_err} refused patterns; '
          f'{len(fails)} failures')
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
