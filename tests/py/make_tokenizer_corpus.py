#!/usr/bin/env python3
"""Write tests/data/tokenizer_corpus.json: strings the tokenizer tests encode with
both the C tokenizer and Hugging Face tokenizers. Deterministic (fixed seed).
Invalid UTF-8 cannot be stored in JSON; tests/test_tokenizer.c covers it.

    python3 tests/py/make_tokenizer_corpus.py"""
import json
import os
import random

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(root, "tests", "data", "tokenizer_corpus.json")

prose = [
    "Hello world!", "Hello, world.", "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little money.",
    "In 1969, Neil Armstrong walked on the Moon.", "Mr. Smith went to Washington D.C. on Jan. 5th.",
    "She sells sea-shells by the sea-shore.", "To be, or not to be: that is the question.",
    "Machine learning models require large amounts of training data.",
    "The mitochondria is the powerhouse of the cell.", "e.g. i.e. etc. vs. a.k.a.",
    "ALL CAPS SENTENCE WITH SHOUTING!!!", "mIxEd CaSe TeXt", "lowercase words only here",
    "A sentence with a trailing space ", " A sentence with a leading space",
    "Once upon a time, in a land far, far away, there lived a king.",
    "Large language models predict the next token.", "The price is $19.99 (plus tax).",
    "Email me at john.doe@example.com or visit https://example.org/path?q=1&r=2#frag.",
    "Python's `str.split()` returns a list.", "Use ~/projects/oasis-kv/build for output.",
    "@user #hashtag $TICKER %percent ^caret &amp *star", "1st 2nd 3rd 4th 21st 102nd",
    "Dear Sir/Madam,\n\nI am writing to apply for the position.\n\nSincerely,\nJane",
    "Q: What is 2+2?\nA: 4.", "Temperature: -3.5°C; humidity: 80%.",
    "The ratio was 3:2, and the score 10–7.", "Antidisestablishmentarianism is long.",
    "Supercalifragilisticexpialidocious!", "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "hello\tworld", "one\ntwo\nthree", "carriage\r\nreturn\r\nlines", "form\x0cfeed and vertical\x0btab",
    "Bullet list:\n- one\n- two\n  - nested\n* star", "# Heading\n\n## Sub-heading\n\nText.",
    "| a | b |\n|---|---|\n| 1 | 2 |", "> quoted line\n>> nested quote",
]
code = [
    "def f(x):\n    return x * 2\n", "for i in range(10):\n\tprint(i)\n",
    "int main(void) { return 0; }", "#include <stdio.h>\nint main() {\n    printf(\"hi\\n\");\n}\n",
    "if (a && b || !c) { x += 1; } else { x -= 1; }", "const x = () => { return [1, 2, 3].map(n => n ** 2); };",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';", "<div class=\"main\"><p>Hi</p></div>",
    "{\"key\": \"value\", \"list\": [1, 2.5, -3e10, true, null]}", "x=1;y=2;z=x+y",
    "    indented with four spaces", "\t\tindented with tabs", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "a_b_c = snake_case_variable_name", "camelCaseVariableName = PascalCase()", "CONSTANT_VALUE = 0xFF",
    "0x1F 0b1010 0o777 1e-9 3.14e+10", "print(f\"{name!r:>10}\")", "lambda x: x if x else None",
    "// comment\n/* block\n   comment */", "#!/usr/bin/env bash\nset -euo pipefail\necho \"$HOME\"",
    "git commit -m 'fix: handle edge case'", "$ ls -la | grep '\\.c$' | wc -l",
    "struct okv_tokenizer *t = NULL;", "std::vector<std::string> v{\"a\", \"b\"};", "i++; --j; k <<= 2; m >>= 1;",
    "a!=b a==b a<=b a>=b a=>b a->b a::b", "return;;;", "```python\nimport os\n```", "    \n    \n",
    "try:\n    pass\nexcept Exception as e:\n    raise\n", "<?xml version=\"1.0\"?><root/>",
]
digits = [
    "0", "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890",
    "3.14159265358979", "1,000,000", "1.000.000,50", "+1 (555) 123-4567", "2024-11-29", "12:34:56",
    "v1.2.3", "0.0.0.0", "192.168.1.1", "1e10", "-42", "007", "x1y2z3", "abc123def456",
    " 1", "  22", "a 1 b 22 c 333", "1 2 3 4 5", "100%", "$1,234.56", "½ cup", " ½ cup", "x² + y³ = z⁴",
    "Ⅻ chapter Ⅳ", "٣٤٥ Arabic-Indic digits", "१२३ Devanagari digits", "１２３ fullwidth", "①②③",
    "3rd of 12 11th", "9" * 40, "12 34 56 78 90",
]
spaces = [
    " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n ", " \t \n ",
    "a  b", "a   b", "a    b", "a \t b", "a\n\nb", "a \n b", "a  \n  b", "word   ", "   word",
    "  leading and trailing  ", "tabs\tbetween\twords", "mixed \t\n\r whitespace", "a\u00a0b non-breaking",
    "em\u2003space", "ideographic\u3000space", "line\u2028separator", "para\u2029separator", "next\u0085line",
    "zero\u200bwidth", "thin\u2009space", "\u00a0\u00a0", " \u00a0 ", "end with newline\n", "\n\nstart with newlines",
    "x" + " " * 17 + "y", "many\n\n\n\n\n\nnewlines", "\t \t \t", "a\r\rb", "spaces before punctuation  !",
]
punct = [
    "!!!", "...", "?!", "--", "—", "–", "«quoted»", "“curly” ‘quotes’", "\"straight\" 'quotes'",
    "(parens) [brackets] {braces}", "a,b;c:d", "…", "¡Hola! ¿Qué?", "***bold***", "___", "~~~", "<<>>",
    "@#$%^&*()", "path/to/file.txt", "C:\\Windows\\System32", "a/b\\c|d", "':;\"", "'", "''", "' '",
]
contractions = [
    "don't", "Don't", "DON'T", "I'm", "I'M", "she'd", "They'll", "we've", "you're", "it's", "IT'S",
    "can't won't shouldn't", "y'all", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Ve",
    "rock 'n' roll", "the dog's bone", "the dogs' bones", "o'clock", "'quoted'", "it\u2019s curly",
    "'ſ long s", "'K kelvin", "x's y'all z'd",
]
accents = [
    "café", "naïve", "résumé", "Zürich", "São Paulo", "Ångström", "Ærø", "Łódź", "Dvořák", "Tiếng Việt có dấu",
    "e\u0301 decomposed", "cafe\u0301", "ñandú", "Straße", "İstanbul", "ﬁ ligature", "Ω ohm Ω", "µ micro μ",
    "Ελληνικά κείμενο", "Русский текст", "Українська мова", "עברית", "العربية", "हिन्दी", "ภาษาไทย",
]
cjk = [
    "你好", "你好，世界！", "我爱自然语言处理。", "中文文本没有空格分隔", "日本語のテキスト", "こんにちは世界",
    "カタカナ", "ｶﾀｶﾅ halfwidth", "한국어 텍스트", "안녕하세요", "漢字かな交じり文", "混合English和中文",
    "東京2024年", "（全角括弧）", "「引用」", "〜波ダッシュ", "𠀀𠀁 astral CJK", "中 文 分 开",
]
emoji = [
    "🙂", "😀😃😄", "👍", "👍🏽", "👍🏿 thumbs", "🇫🇷", "🇺🇸🇬🇧", "👨\u200d👩\u200d👧\u200d👦",
    "🏳️\u200d🌈", "1️⃣", "#️⃣", "❤️", "♥", "☃", "🎉 party 🎉", "emoji🙂inline", "🧑\u200d💻 coder",
    "👩🏽\u200d🚀", "🫠", "a🙂b🙂c", "💩💩💩",
]
combining = [
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇", "a\u0300\u0301\u0302\u0303", "n\u0303", "क्षत्रिय", "स्‍त्री",
    "ผู้ใหญ่", "שָׁלוֹם", "مَرْحَبًا", "\u0301 leading combining", "ẹ̀", "o\u0308\u0304", "Å vs A\u030a",
    "g\u0303\u0323", "\u200d zwj alone", "\u200c zwnj alone", "a\ufe0f variation", "\ufeffBOM start",
]
specials = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nHello<|im_end|>\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|>", "<|im_start", "im_start|>", "<|im_start|x", "<<|im_start|>>", "<|<|im_end|>|>",
    "text<|endoftext|>more text", " <|im_start|> spaced ", "<|eot_id|>", "<|begin_of_text|>Hello",
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "<|end_of_text|>", "<custom> token",
    "a<custom>b", "<repo_name>oasis<file_sep>", "<|IM_START|>", "< |im_start| >",
]
singles = ["", "a", "A", "z", ".", "\x01", "\x7f", "~", "é", "中", "🙂", "\u00ad soft hyphen", "\u2060", "ÿ", "\u0100"]

long_prose = " ".join(prose[:20])
longs = [
    long_prose * 5,
    "a" * 5000,
    " " * 3000,
    "1" * 2000,
    "🙂" * 500,
    "\n" * 1000,
    "ab" * 2500,
    "中文" * 1000,
    (code[1] + code[3]) * 20,
    ("The year 2024 had 366 days; π≈3.14159. " * 60),
]

rng = random.Random(1234)
pool = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + \
    list(" \t\n\r.,;:!?'\"-_()[]{}<>/\\|@#$%^&*+=~`") + \
    list("éüñçßøåÆŒ中文日本語한국어🙂👍🏽❤️½²٣१\u0301\u200d\u00a0\u3000\u2028ſK") + \
    ["'s", "'ll", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "  ", "\n\n", "123", "don't"]
randoms = []
for i in range(80):
    n = rng.randint(1, 60)
    randoms.append("".join(rng.choice(pool) for _ in range(n)))
words = "the of and to in is was for on that with as by at from it an be this are or".split()
for i in range(20):
    randoms.append(" ".join(rng.choice(words + ["1999", "42", "Hello", "café", "中文", "🙂"]) for _ in range(rng.randint(3, 40))))

corpus = prose + code + digits + spaces + punct + contractions + accents + cjk + emoji + combining + specials + singles + longs + randoms
seen = set()
uniq = []
for s in corpus:
    if s not in seen:
        seen.add(s)
        uniq.append(s)
with open(out, "w", encoding="utf-8") as f:
    json.dump(uniq, f, ensure_ascii=True, indent=0)
    f.write("\n")
print(f"{len(uniq)} strings -> {out}")
