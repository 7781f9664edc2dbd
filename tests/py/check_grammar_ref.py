"""The GBNF recognizer (src/structured/grammar.c) against Lark's Earley parser.

usage: check_grammar_ref.py OKV_GRAMMAR_CHECK [SEED]

Each grammar below is written twice, in GBNF for us and by hand in Lark's syntax, and the two
must describe the same language: Lark (a parser this project did not write) is the reference,
as Lark(..., parser="earley", lexer="dynamic").parse(text) succeeding or not. Every Lark
terminal matches one character or a fixed string, so the dynamic lexer's tokenizing cannot
lose a parse. Texts for each grammar:
  - random sentences that the C side walks through its recognizer (random allowed bytes, then a
    shortest completion);
  - random sentences made in Python by expanding the Lark grammar's rules at random (the
    terminals' regular expressions sampled through Python's own regex parser);
  - mutations of those (a byte or character deleted, inserted or replaced, or a prefix);
  - random strings over the grammar's characters plus noise: other ASCII, multi-byte UTF-8 and
    invalid UTF-8 (which Lark never sees: such bytes are not a sentence).
For every text:
  - our verdict (a complete sentence or not) equals Lark's;
  - every prefix of a text Lark accepts is viable in ours (it takes every byte);
  - where ours takes every byte of a text without accepting, it names a completion (a shortest
    path to an accepting state) and Lark must accept text + completion;
  - where ours refuses byte N, no text Lark accepts starts with bytes 0..N.
"""
import os
import random
import re
import subprocess
import sys
import tempfile
import time

try:
    import re._parser as sre_parse   # Python 3.11+
except ImportError:   # pragma: no cover
    import sre_parse
from lark import Lark
from lark.exceptions import LarkError

# (name, GBNF, Lark, extra characters for the random texts)
GRAMMARS = [
    ('json', r'''
root   ::= value
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )?
ws     ::= [ \t\n]*
''', r'''
start: value
value: object | array | string | number | "true" | "false" | "null"
object: "{" ws (member ("," ws member)*)? "}"
member: string ws ":" ws value ws
array: "[" ws (value ws ("," ws value ws)*)? "]"
string: "\"" (/[^"\\]/ | "\\" /["\\\/bfnrt]/)* "\""
number: "-"? ("0" | /[1-9]/ /[0-9]/*) ("." /[0-9]/+)?
ws: /[ \t\n]/*
''', 'truefalsenull'),
    ('arith', r'''
root   ::= expr
expr   ::= term ( ("+" | "-") term )*
term   ::= factor ( ("*" | "/") factor )*
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]+
''', r'''
start: expr
expr: term (("+" | "-") term)*
term: factor (("*" | "/") factor)*
factor: number | "(" expr ")" | "-" factor
number: /[0-9]/+
''', '(((())))'),
    ('csv', r'''
root  ::= field ("," field)* "\n"?
field ::= [^,"\n]* | "\"" ( [^"] | "\"\"" )* "\""
''', r'''
start: field ("," field)* "\n"?
field: /[^,"\n]/* | "\"" (/[^"]/ | "\"\"")* "\""
''', 'ab ,,""\n'),
    ('kv', r'''
root ::= pair ( ";" " "? pair )*
pair ::= key "=" val
key  ::= [a-zA-Z_] [a-zA-Z0-9_-]*
val  ::= [0-9]+ | "'" [^']* "'"
''', r'''
start: pair (";" " "? pair)*
pair: key "=" val
key: /[a-zA-Z_]/ /[a-zA-Z0-9_-]/*
val: /[0-9]/+ | "'" /[^']/* "'"
''', "ab_-=;' 09"),
    ('greek', r'''
root ::= [α-ω]+ (" " [А-Яа-я]{1,3})? "!"?
''', r'''
start: /[α-ω]/+ (" " /[А-Яа-я]/ ~ 1..3)? "!"?
''', 'αβωΰϊ ДаяЯЀ!'),
    ('bounds', r'''
root ::= "a"{2,4} "b"{3} ("cd"){0,2} "e"{1,}
''', r'''
start: "a" ~ 2..4 "b" ~ 3 ("cd") ~ 0..2 "e"+
''', 'aabbbcdee'),
    ('brackets', r'''
root ::= item*
item ::= "(" item* ")" | "[" item* "]" | "x"
''', r'''
start: item*
item: "(" item* ")" | "[" item* "]" | "x"
''', '(([[x]]))'),
    ('dot', r'''
root ::= "<" .{0,5} ">"
''', r'''
start: "<" /./s ~ 0..5 ">"
''', '<<>>a\n'),
    ('jstring', r'''
root ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
''', r'''
start: "\"" (/[^"\\\x00-\x1f]/ | "\\" (/["\\\/bfnrt]/ | "u" /[0-9a-fA-F]/ ~ 4))* "\""
''', '"\\u00e9fF\x01'),
    ('nullable', r'''
root ::= ("a"? "b"?)* "c"
''', r'''
start: ("a"? "b"?)* "c"
''', 'abc'),
    ('email', r'''
root  ::= ident ("." ident)* "@" ident ("." ident)+
ident ::= [a-z0-9]+ ("-" [a-z0-9]+)*
''', r'''
start: ident ("." ident)* "@" ident ("." ident)+
ident: /[a-z0-9]/+ ("-" /[a-z0-9]/+)*
''', 'ab9.-@'),
    ('mutual', r'''
root ::= a
a    ::= "x" b | "y"
b    ::= "(" a ")" a?
''', r'''
start: a
a: "x" b | "y"
b: "(" a ")" a?
''', 'xy()'),
    ('keywords', r'''
root ::= ("for" | "foreach" | "form" "at"? | "f") (" " root)?
''', r'''
start: ("for" | "foreach" | "form" "at"? | "f") (" " start)?
''', 'foreachmat '),
    ('config', r'''
# a tiny configuration language: rules over several lines, comments
root  ::= line+          # one line at least
line  ::= name ws "=" ws value "\n"
name  ::= [a-z]
          [a-z0-9_]*
value ::= [0-9]+
        | "\"" [^"\n]* "\""
        | "[" ws ( value ( ws "," ws value )* )? ws "]"
ws    ::= " "*
''', r'''
start: line+
line: name ws "=" ws value "\n"
name: /[a-z]/ /[a-z0-9_]/*
value: /[0-9]/+ | "\"" /[^"\n]/* "\"" | "[" ws (value (ws "," ws value)*)? ws "]"
ws: " "*
''', 'ab_1 ="[],\n'),
    ('palindrome', r'''
root ::= "a" root "a" | "b" root "b" | "c" | ""
''', r'''
start: "a" start "a" | "b" start "b" | "c"?
''', 'abcab'),
    ('number', r'''
root ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
''', r'''
start: "-"? ("0" | /[1-9]/ /[0-9]/*) ("." /[0-9]/+)? (/[eE]/ /[+-]/? /[0-9]/+)?
''', '-0123.eE+9'),
    ('emoji', r'''
root ::= ([😀-🙏] | [^\x00-\x7f😀-🙏])+ "."
''', r'''
start: (/[😀-🙏]/ | /[^\x00-\x7f😀-🙏]/)+ "."
''', '😀🙏😃.éα中'),
    ('unitcycle', r'''
root ::= item | "[" root ("," root)* "]"
item ::= "i" | "(" item ")" | root
''', r'''
start: item | "[" start ("," start)* "]"
item: "i" | "(" item ")" | start
''', '[(i)],'),
]

NOISE = ['a', 'z', 'A', '0', '9', ' ', '\n', '\t', '_', '-', '.', ',', '"', '\\', '(', ')', '[', ']', '{', '}',
         'é', 'α', 'ω', 'Я', '中', '\U0001F600', '\U0010ffff', '\x01', '\x7f']
BAD = [b'\x80', b'\xbf', b'\xc0\xaf', b'\xe0\x80\x80', b'\xed\xa0\x80', b'\xf4\x90\x80\x80', b'\xf5\x80\x80\x80',
       b'\xce', b'\xf0\x9f\x98', b'\xff']
# code points that negated classes and . are sampled from (rejection sampling)
POOL = [chr(c) for c in list(range(0x20, 0x7f)) + [0x0a, 0x09, 0x01, 0xe9, 0x3b1, 0x3c9, 0x42f, 0x4e2d, 0x1f600,
                                                 0x1f64f, 0x1f650, 0x10ffff, 0xe000, 0xd7ff]]


# ---- Lark's side ----

def lark_accepts(parser, b):
    try:
        s = b.decode('utf-8')
    except UnicodeDecodeError:
        return False
    try:
        parser.parse(s)
        return True
    except LarkError:
        return False


def random_char(rng):
    """A code point for rejection sampling: mostly from POOL, sometimes any valid one."""
    if rng.random() < 0.8:
        return rng.choice(POOL)
    while True:
        c = rng.randint(0, 0x10ffff)
        if not 0xd800 <= c <= 0xdfff:
            return chr(c)


CATEGORIES = {'CATEGORY_DIGIT': lambda c: c.isdigit() and c.isascii(), 'CATEGORY_SPACE': lambda c: c in ' \t\n\r\f\v',
              'CATEGORY_WORD': lambda c: c.isascii() and (c.isalnum() or c == '_')}


def in_node(c, name, av):
    """c is taken by a one-character node of Python's regex parse (ANY: never a newline here, so that the sample
    holds without DOTALL too; the categories as ASCII, a subset of Python's)"""
    if name == 'ANY':
        return c != '\n'
    if name == 'NOT_LITERAL':
        return c != chr(av)
    neg, hit = False, False
    for k, v in av:
        k = str(k)
        if k == 'NEGATE':
            neg = True
        elif k == 'LITERAL':
            hit |= c == chr(v)
        elif k == 'RANGE':
            hit |= v[0] <= ord(c) <= v[1]
        elif k == 'CATEGORY':
            v = str(v)
            pos = v.replace('CATEGORY_NOT_', 'CATEGORY_')
            hit |= CATEGORIES[pos](c) != (pos != v)
        else:
            raise RuntimeError(f'set item {k} not handled')
    return hit != neg


def sample_regex(rng, parsed, whole):
    """A random string matched by a regex, from Python's own parse of it. Negated classes, . and
    class escapes are sampled by rejection against `whole`, the terminal's compiled regex, which
    is right because every such terminal here is a single character."""
    out = []
    for op, av in parsed:
        name = str(op)
        if name == 'LITERAL':
            out.append(chr(av))
        elif name == 'IN' and all(str(k) in ('LITERAL', 'RANGE') for k, _ in av):
            k, v = rng.choice(av)
            if str(k) == 'LITERAL':
                out.append(chr(v))
            else:
                c = rng.randint(*v)
                while 0xd800 <= c <= 0xdfff:
                    c = rng.randint(*v)
                out.append(chr(c))
        elif name in ('ANY', 'IN', 'NOT_LITERAL'):
            for _ in range(10000):
                c = random_char(rng)
                if in_node(c, name, av):
                    out.append(c)
                    break
            else:
                raise RuntimeError(f'cannot sample {op} {av}')
        elif name == 'SUBPATTERN':
            out.append(sample_regex(rng, av[-1], whole))
        elif name == 'BRANCH':
            out.append(sample_regex(rng, rng.choice(av[1]), whole))
        elif name in ('MAX_REPEAT', 'MIN_REPEAT'):
            lo, hi, sub = av
            n = rng.randint(lo, min(hi, lo + 3))
            out.extend(sample_regex(rng, sub, whole) for _ in range(n))
        elif name in ('ASSERT', 'ASSERT_NOT', 'AT'):   # common.ESCAPED_STRING's lookbehind: the text is checked anyway
            pass
        else:
            raise RuntimeError(f'regex op {op} not handled')
    return ''.join(out)


class Expander:
    """Random sentences of a Lark grammar, by expanding its (compiled, plain BNF) rules."""

    def __init__(self, parser):
        self.rules = {}
        for r in parser.rules:
            self.rules.setdefault(r.origin.name, []).append([(s.name, s.is_term) for s in r.expansion])
        self.terms = {}
        for t in parser.terminals:
            p = t.pattern
            if type(p).__name__ == 'PatternStr':
                self.terms[t.name] = ('str', p.value)
            else:
                self.terms[t.name] = ('re', p.to_regexp())
        # the least length each rule can derive and an expansion that gives it, for heading back
        # once deep enough (recorded only on a strict improvement, so these never form a cycle)
        inf = float('inf')
        self.min_len = {n: inf for n in self.rules}
        self.best = {}
        changed = True
        while changed:
            changed = False
            for n, exps in self.rules.items():
                for e in exps:
                    v = sum(self.sym_min(s, t) for s, t in e)
                    if v < self.min_len[n]:
                        self.min_len[n] = v
                        self.best[n] = e
                        changed = True

    def sym_min(self, name, is_term):
        if is_term:
            kind, v = self.terms[name]
            return len(v) if kind == 'str' else 1
        return self.min_len[name]

    def term(self, rng, name):
        kind, v = self.terms[name]
        if kind == 'str':
            return v
        return sample_regex(rng, sre_parse.parse(v, re.S), re.compile(v, re.S))

    def expand(self, rng, name, depth, budget):
        exps = self.rules[name]
        if depth > 12 or budget[0] <= 0:
            e = self.best[name]
        else:
            e = rng.choice(exps)
        out = []
        for s, t in e:
            budget[0] -= 1
            out.append(self.term(rng, s) if t else self.expand(rng, s, depth + 1, budget))
        return ''.join(out)

    def sentence(self, rng, start='start'):
        return self.expand(rng, start, 0, [rng.randint(3, 40)])


# ---- our side ----

def run_tool(tool, gfile, args=(), lines=()):
    r = subprocess.run([tool, gfile, *args], input=''.join((x.hex() or '-') + '\n' for x in lines),
                       capture_output=True, text=True)
    return r.returncode, r.stdout.splitlines()


def alphabet(gbnf, extra):
    chars = {c for c in gbnf if c not in ' \n\t:=|#\\'} | set(extra)
    return sorted(chars)


def rand_text(rng, alpha):
    out = bytearray()
    for _ in range(rng.randint(0, 14)):
        k = rng.random()
        if k < 0.7:
            out += rng.choice(alpha).encode()
        elif k < 0.93:
            out += rng.choice(NOISE).encode()
        else:
            out += rng.choice(BAD)
    return bytes(out)


def mutate(rng, b, alpha):
    i = rng.randint(0, len(b))
    k = rng.randint(0, 4)
    piece = rng.choice([rng.choice(alpha).encode(), rng.choice(alpha).encode(), rng.choice(NOISE).encode(),
                        rng.choice(BAD)])
    if k == 0 and b:
        return b[:i] + b[i + 1:]
    if k == 1:
        return b[:i] + piece + b[i:]
    if k == 2 and b:
        return b[:i] + piece + b[i + 1:]
    if k == 3:   # a whole character out
        s = b.decode('utf-8', 'replace')
        j = rng.randint(0, len(s))
        return (s[:j] + s[j + 1:]).encode()
    return b[:i]   # a prefix


def check_grammar(tool, tmpdir, name, gbnf, lark_text, extra, rng, stats, ascii_exact=False):
    """gbnf: the grammar as ours reads it (GBNF, or the Lark text itself: our Lark front end). ascii_exact: the
    grammar's regexes use \\d \\w, which ours takes on the safe side (ASCII): the verdicts must be equal on ASCII
    texts, and on the others ours may refuse what Lark accepts (never the other way)"""
    fails = []
    gfile = os.path.join(tmpdir, name.replace('/', '_') + '.txt')
    with open(gfile, 'w', encoding='utf-8') as f:
        f.write(gbnf)
    parser = Lark(lark_text, start='start', parser='earley', lexer='dynamic')
    seed = rng.randint(0, 10**6)
    rc, out = run_tool(tool, gfile, ['--walk', '40', str(seed)])
    if rc != 0 or not out or not out[0].startswith('states '):
        return [f'{name}: walk: rc {rc}: {out[:2]}']
    walks = [bytes.fromhex(x) if x != '-' else b'' for x in out[1:]]
    for w in walks:
        stats['walks'] += 1
        if not lark_accepts(parser, w):
            fails.append(f'{name}: our walk {w!r} is not a sentence for Lark')
    expander = Expander(parser)
    made = [expander.sentence(rng).encode() for _ in range(40)]
    stats['expanded'] += len(made)
    alpha = alphabet(gbnf, extra)
    texts = set(walks) | set(made)
    valid = walks + made
    for _ in range(150):
        texts.add(mutate(rng, rng.choice(valid), alpha))
    for _ in range(150):
        texts.add(rand_text(rng, alpha))
    texts = sorted(texts)
    rc, out = run_tool(tool, gfile, [], texts)
    if rc != 0 or len(out) != len(texts) + 1:
        return fails + [f'{name}: check run: rc {rc}, {len(out)} lines for {len(texts)} texts']
    lark_ok = {b: lark_accepts(parser, b) for b in texts}
    accepted = [b for b in texts if lark_ok[b]]
    prefixes = {a[:k] for a in accepted for k in range(len(a) + 1)}
    for b, line in zip(texts, out[1:]):
        f = line.split()
        ours, taken = f[0] == 'accept', int(f[1])
        stats['texts'] += 1
        stats['accepted'] += lark_ok[b]
        if 'overflow' in f:
            fails.append(f'{name} on {b!r}: a limit was hit')
        if ascii_exact and not b.isascii():
            if ours and not lark_ok[b]:
                fails.append(f'{name} on {b!r}: ours accepts, Lark rejects')
            continue
        if ours != lark_ok[b]:
            fails.append(f'{name} on {b!r}: ours {"accepts" if ours else "rejects"} (took {taken} bytes), '
                         f'Lark {"accepts" if lark_ok[b] else "rejects"}')
        if lark_ok[b] and taken != len(b):
            fails.append(f'{name} on {b!r}: Lark accepts, but ours refuses byte {taken}')
        if taken < len(b):
            stats['refused'] += 1
            if b[:taken + 1] in prefixes:
                fails.append(f'{name} on {b!r}: ours refuses byte {taken}, but Lark accepts a text that starts '
                             f'with {b[:taken + 1]!r}')
        elif not ours:
            stats['completed'] += 1
            comp = f[2] if len(f) > 2 else 'none'
            if comp == 'none':
                fails.append(f'{name} on {b!r}: ours takes every byte but finds no completion')
            elif not lark_accepts(parser, b + (bytes.fromhex(comp) if comp != '-' else b'')):
                fails.append(f'{name} on {b!r}: our completion {comp} does not make a sentence for Lark')
    return fails


# grammars in Lark's syntax only, read by our Lark front end (src/structured/grammar_lark.c): its %ignore,
# %import common, /regex/ terminals with flags, direct left recursion, "..."i, ranges, ~ repetition, [ ],
# -> aliases, priorities, ?/!/_ prefixes, comments and continuation lines. Multi-character terminals are
# written so that Lark's dynamic lexer cannot lose a parse that a character-level reading finds (a token is
# always followed by a character no terminal that could end there takes).
LARK_GRAMMARS = [
    ('vllm_sql', r'''
?start: select_statement
?select_statement: "SELECT " column_list " FROM " table_name
?column_list: column_name ("," column_name)*
?table_name: identifier
?column_name: identifier
?identifier: /[a-zA-Z_][a-zA-Z0-9_]*/
''', 'SELECT FROM ab_9,'),
    ('calc', r'''
// left recursion, %import with an alias, %ignore
?start: sum
?sum: product
    | sum "+" product   -> add
    | sum "-" product   -> sub
?product: atom
    | product "*" atom  -> mul
    | product "/" atom  -> div
?atom: NUMBER           -> number
     | "-" atom         -> neg
     | NAME             -> var
     | "(" sum ")"
%import common.CNAME -> NAME
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
''', '1+2*3-(x_1)/4.5e-3 \t'),
    ('json_lark', r'''
?start: value
?value: object
      | array
      | string
      | SIGNED_NUMBER      -> number
      | "true"             -> true
      | "false"            -> false
      | "null"             -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
''', '{}[]:,"\\ -0.5e+2truefalsenull\n'),
    ('keywords', r'''
start: stmt+
stmt: _kw_let _name "=" _int ";"   # a comment too
    | "print"i _name ";"
    | _hex ~ 2 ";" | _letter ~ 1..3 "!" ";"
_kw_let.2: "let"i
_name: /[a-z]+/i
_int: /[0-9]+/
_hex: "0".."9" | "a".."f"
_letter: "α".."ω"
%ignore " "
%ignore /\t+/
''', 'letPRINTx=12;af0 αβγω!\t'),
    ('block', r'''
start: (line _NL)*
line: WORD (":" WORD)? | "#" COMMENT_TEXT?
COMMENT_TEXT: /[^\n]+/
_NL: /\r?\n/
%import common (WORD, LETTER)
''', 'ab:Z#x \n\r'),
    ('unicode_classes', r'''
start: X "," Y "," Z ";" W ";" V
X: /\w+/
Y: /[^\W\d]+/
Z: /[^\s,;]{1,3}/
W: /[\D][^\s;]?/
V: /[^\d\W]\s*/
''', 'a_9,;é \u3000\x1c\x85Ω٣'),
    ('regex_flags', r'''
start: A B C
A: /ab+/i
B: /x.y/s
C: /[^\s]{1,2}/
''', 'aBbx\nyz!'),
]

# grammars that must be refused, and what the message must say
REFUSED = [
    ('start: "a" | foo', "undefined rule 'foo'"), ('a: "x"', "no rule named 'start'"),
    ('start: x\nx: y "a"\ny: x "b" | "c"', 'left-recursive'), ('start: _sep{"a"}', 'templates'),
    ('start: "a"\n%declare B', '%declare is not supported'), ('start: A\n%import other.A', "'common' module"),
    ('start: A\n%import common.NOPE', 'common.NOPE is not among'), ('start: /(?<=a)b/', 'lookbehind'),
    ('start: "a" ~ 5..2', 'out of order'), ('start: "a\nb"', 'unterminated string'), ('start: ("a"', "unclosed '('"),
    ('start: /a/x', 'flag x'), ('start: "ab".."z"', 'one character'), ('start: a\na: start "x"', 'left-recursive'),
    ('start: "a"\n  ) ', 'expected a rule'), ('start: "a" )', "unexpected ')'"), ('root ::= x', "undefined rule 'x'"), ('x ::= "a"', "no rule named 'root'"),
    ('root ::= root "a" | "b"', 'left-recursive'), ('root ::= "a" root', 'no finite text'),
    ('root ::= "a"{2,1}', 'out of order'), ('root ::= "a"{1001}', 'too large'), ('', 'empty'),
]


def main():
    tool = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time()) % 100000
    print(f'seed {seed} (check_grammar_ref.py TOOL {seed} repeats this run)')
    rng = random.Random(seed)
    t0 = time.time()
    stats = {'texts': 0, 'accepted': 0, 'walks': 0, 'expanded': 0, 'refused': 0, 'completed': 0}
    fails = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for name, gbnf, lark_text, extra in GRAMMARS:   # ours on the GBNF, then on the Lark text itself
            fails += check_grammar(tool, tmpdir, name, gbnf, lark_text, extra, rng, stats)
            fails += check_grammar(tool, tmpdir, name + '/lark', lark_text, lark_text, extra, rng, stats)
        for name, lark_text, extra in LARK_GRAMMARS:
            fails += check_grammar(tool, tmpdir, name, lark_text, lark_text, extra, rng, stats,
                                   ascii_exact=name.startswith('unicode_'))
        for i, (text, what) in enumerate(REFUSED):
            gfile = os.path.join(tmpdir, f'refused{i}.gbnf')
            with open(gfile, 'w') as f:
                f.write(text)
            rc, out = run_tool(tool, gfile)
            if rc != 3 or not out or what not in out[0]:
                fails.append(f'{text!r}: rc {rc}, {out[:1]}: must be refused naming {what!r}')
    for f in fails[:40]:
        print('FAIL', f)
    print(f'{len(GRAMMARS)} grammars in GBNF and Lark, {len(LARK_GRAMMARS)} in Lark only, {stats["texts"]} texts ({stats["accepted"]} Lark sentences, {stats["refused"]} '
          f'refused by ours at some byte, {stats["completed"]} viable prefixes completed and checked), '
          f'{stats["walks"]} of our walks and {stats["expanded"]} Lark expansions among them, {len(REFUSED)} refused '
          f'grammars; {len(fails)} failures; {time.time() - t0:.1f} s')
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
