#!/usr/bin/env python3
"""Writes tests/ref/tok/corpus.txt: the tokenizer conformance corpus.

Every fragment below was written for dlm's tests. Lines are built from them
deterministically (fixed seed), so re-running this script reproduces the
committed corpus byte for byte. The corpus is what HF tokenizers and dlm both
encode line by line (each line exactly as written, without its newline).
"""
import random
import sys

rng = random.Random(20261129)

prose = [
    "The quick brown fox jumps over the lazy dog.",
    "She said she'd come, but we'll see if they've really left.",
    "I'm sure it's fine; you're the one who's worried.",
    "WE'RE LOUD, WE'LL SHOUT, AND IT'S OK'D BY THE BOARD.",
    "Don't, won't, can't, shouldn't've, y'all'd've.",
    "It'ſ a long s, and iT'S mixed case, 'Tis the season.",
    "A document becomes a language model: train, prompt, export.",
    "Résumé, naïve café, coöperate, façade, jalapeño, Ångström.",
    "Straße, Œuvre, Ærø, Łódź, Đà Nẵng, İstanbul, ǅemal.",
    "Γειά σου Κόσμε· η γλώσσα είναι όμορφη.",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Ծիծեռնակ, საქართველო, Ⴀ, ᚠᛇᚻ᛫ᛒᛦᚦ.",
    "שלום עולם, זה משפט בעברית עם ניקוד: שָׁלוֹם.",
    "مرحبا بالعالم، هذه جملة عربية مع أرقام ١٢٣٤٥ وتشكيل: مُحَمَّد.",
    "سلام دنیا، این یک جمله فارسی است با اعداد ۱۲۳۴.",
    "नमस्ते दुनिया, यह हिंदी में एक वाक्य है। क़िला, ज़रा, फ़ोन।",
    "অসমীয়া আৰু বাংলা লিপি, ੴ ਸਤਿ ਨਾਮੁ, ગુજરાતી.",
    "தமிழ் ஒரு பழமையான மொழி, తెలుగు, ಕನ್ನಡ, മലയാളം.",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "ສະບາຍດີ, ជំរាបសួរ, မင်္ဂလာပါ, བཀྲ་ཤིས་བདེ་ལེགས།",
    "你好，世界！这是一个中文句子，包含标点符号。",
    "繁體中文：臺灣的資訊科技產業發達。",
    "こんにちは世界。カタカナとひらがな、漢字が混ざっています。",
    "ｶﾀｶﾅ半角、ＡＢＣ全角、１２３全角数字、！？（）。",
    "안녕하세요 세계, 한국어 문장입니다. ㄱㄴㄷ 각",
    "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ᠌ with a Mongolian vowel separator ᠨ᠎ᠠ here.",
    "Emoji: 😀 😃 😄 🚀 🎉 ❤️ ✨ 🔥 💯 🙏",
    "Family 👨‍👩‍👧‍👦, couple 👩‍❤️‍👨, pirate 🏴‍☠️, rainbow 🏳️‍🌈.",
    "Skin tones: 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿 and 🧑🏽‍💻 at work.",
    "Flags 🇯🇵 🇩🇪 🇧🇷 🇺🇸 and keycaps 1️⃣ 2️⃣ #️⃣ *️⃣.",
    "Math: ∀x∈ℝ, ∃y: x²+y²=z², ∑ᵢ aᵢ ≤ ∫₀^∞ f(t) dt, √2 ≈ 1.414.",
    "Fractions ½ ⅓ ¾, Roman Ⅻ ⅻ, circled ① ② ⑳, superscripts ¹²³.",
    "Currency: $1,234.56, €99, £3.50, ¥1000, ₹500, ₿0.0021.",
    "Combining: e\u0301 a\u0308 o\u0303 n\u0303 A\u030a c\u0327 i\u0307\u0301.",
    "Zalgo: t\u0336\u0334e\u0337\u0335x\u0338t\u0334\u0336 with many marks.",
    "Hangul jamo \u1100\u1161\u11a8 composes under NFC, \u212b angstrom sign, \uf900 compat ideograph.",
    "Ligatures ﬁ ﬂ ﬀ ﬃ, and ㍿ ㌀ squared words, Ⓐ circled letter.",
    "Zero width: a\u200bb c\u200cd e\u200df, BOM\ufeffinside, soft\u00adhyphen.",
    "Spaces: no-break\u00a0space, ideographic\u3000space, em\u2003space, thin\u2009space, narrow\u202fspace.",
    "Control-ish: tab\there, bell\x07, escape\x1b[0m, delete\x7f, unit sep\x1f.",
    "Line separator\u2028and paragraph separator\u2029and NEL\u0085inside.",
]

code = [
    "def tokenize(text: str) -> list[int]:",
    "    return [vocab[t] for t in text.split() if t in vocab]",
    "for (int i = 0; i < n; i++) { sum += a[i] * b[i]; }",
    "#include <stdio.h>\\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); println!(\"{:?}\", v); }",
    "const add = (a, b) => a + b; export default { add };",
    "SELECT id, name FROM users WHERE created_at >= '2024-01-01' ORDER BY id DESC LIMIT 10;",
    "<div class=\"card\"><span id='x'>&nbsp;&lt;b&gt;</span></div>",
    "{\"key\": [1, 2.5, -3e-7, true, null], \"nested\": {\"a\": \"b\"}}",
    "if err != nil {\n\treturn fmt.Errorf(\"open %s: %w\", path, err)\n}",
    "public static void main(String[] args) throws IOException {",
    "    std::vector<std::pair<int, std::string>> v{{1, \"one\"}, {2, \"two\"}};",
    "x = np.linspace(0, 2 * np.pi, 100); y = np.sin(x) ** 2",
    "lambda x: x if x > 0 else -x  # absolute value",
    "$ git commit -m 'fix: off-by-one in merge loop' && git push origin main",
    "sed -n '1,20p' file.txt | awk -F'\\t' '{print $2}' | sort | uniq -c",
    "regex = r\"(?i:'s|'t|'re)|\\p{L}+|\\p{N}{1,3}\"",
    "a->b->c = *p++ ^ ~q >> 3 << 2 | (r & 0xFF) ?: NULL;",
    "#define MAX(a,b) ((a)>(b)?(a):(b))",
    "match x { Some(ref y) if *y > 0 => y, _ => &0 }",
    "defmodule Foo do def bar(x), do: x |> Enum.map(&(&1 * 2)) end",
    "(defun fact (n) (if (<= n 1) 1 (* n (fact (- n 1)))))",
    "main = putStrLn . unwords . map show $ takeWhile (< 100) primes",
    "let rec fib n = if n < 2 then n else fib (n-1) + fib (n-2)",
    "@media (max-width: 600px) { .nav { display: none !important; } }",
    "--- a/src/tok.c\n+++ b/src/tok.c\n@@ -1,3 +1,4 @@",
    "    \t  mixed indentation\t\tline",
    "        deeply_indented_call(arg1, arg2, kwarg=\"value\")",
    "END_OF_LINE_COMMENT; // TODO(dlm): handle the \\r\\n case",
    "0x7fffffff 0b1010 0o755 1_000_000 3.14159e+10 6.02214076e23",
]

urls = [
    "https://huggingface.co/docs/tokenizers/api/pre-tokenizers#split",
    "http://example.com:8080/path/to/page.html?query=1&sort=desc#frag",
    "ftp://files.example.org/pub/README.txt",
    "mailto:someone@example.com?subject=Hello%20World",
    "See https://en.wikipedia.org/wiki/Byte_pair_encoding for details.",
    "git@github.com:org/repo.git and ssh://user@host:22/srv/repo",
    "file:///home/user/.dlm/store/01HZY3/adapter/v0001/adapter_model.safetensors",
    "https://例え.テスト/パス?キー=値 and https://xn--r8jz45g.xn--zckzah/",
    "data:text/plain;base64,SGVsbG8sIFdvcmxkIQ==",
    "user_name+tag@sub.domain.co.uk, 192.168.1.254, [2001:db8::1]:443",
]

specials = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>",
    "<|im_start|>user<|im_end|><|im_start|>assistant",
    "<|endoftext|>",
    "text before<|endoftext|>text after",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>",
    "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "<tool_call>{\"name\": \"f\"}</tool_call> <tool_response>ok</tool_response>",
    "<|fim_prefix|>def f(<|fim_suffix|>):<|fim_middle|>",
    "almost special: <|im_start> <im_end|> <|endoftext| |endoftext|> <| im_end |>",
    "nested <<|im_end|>> and doubled <|im_end|><|im_end|> and <|im_end|>x",
    "case matters: <|IM_START|> <|Im_End|> <THINK> </Think>",
    "<|reserved_special_token_5|> <|reserved_special_token_250|> <|reserved_special_token_251|>",
    "<|eom_id|><|python_tag|><|finetune_right_pad_id|>",
    "   <|im_start|>   spaced   <|im_end|>   ",
    "\t<think>\t</think>\t",
    "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>",
    "＜think＞ fullwidth brackets around think ＜/think＞",
    "<|box_start|>(10,20),(30,40)<|box_end|>",
    "<|repo_name|>dlm<|file_sep|>src/tok/tok.c",
]

numbers = [
    "0", "7", "42", "123", "1234", "12345", "123456789012345678901234567890",
    "3.14159", "-0.001", "1e10", "2.5E-3", "1,000,000", "1.000.000,50", "99%",
    "2024-11-29", "23:59:59.999", "+1 (555) 010-9999", "v1.2.3-rc.4", "#123456",
    "١٢٣٤٥٦٧٨٩٠", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "๐๑๒๓๔๕๖๗๘๙", "１２３４５",
    "一二三四五", "Ⅰ Ⅱ Ⅲ Ⅳ Ⅴ", "①②③", "¹²³⁴", "₀₁₂₃", "½¼¾", "𝟎𝟏𝟐𝟑",
]

words = ("the of and to in is was for on that with as by at from his her they this have "
         "not are but or be an which one all were when there can been has more if will "
         "data model train token merge vocabulary adapter export prompt document section "
         "Haus Wasser über schön niño año corazón été forêt naïve city цвет дом книга "
         "بيت كتاب قلم घर किताब पानी บ้าน หนังสือ 家 书 水 本 家族 집 책 물").split()

ws_variants = [" ", "  ", "   ", "\t", "\t\t", " \t ", "    ", "\u00a0", "\u3000", "        ", " \u2003 "]

def sentence(k):
    return " ".join(rng.choice(words) for _ in range(k))

lines = []
# 1. every handwritten fragment as is, and with whitespace variations around it
for group in (prose, code, urls, specials, numbers):
    for frag in group:
        for part in frag.split("\n"):
            lines.append(part)
        lines.append(" " + frag.replace("\n", " "))
        lines.append(frag.replace("\n", " ") + "  ")
        lines.append("\t" + frag.replace("\n", "\t"))

# 2. whitespace runs, tabs and empty lines
lines += ["", " ", "  ", "\t", "\t\t\t", " " * 17, " " * 64, "\t \t \t", "a" + " " * 40 + "b",
          "x\ty\t\tz", "trailing tab\t", "   leading and trailing   ", "\r", "carriage\rreturn",
          "windows line\r", " \r \r ", "\u00a0\u00a0", "\u3000\u3000word", "\u2028", "\u0085",
          " \u180e1", "x \u180e\u180e y", "\u180e", "a\u180e b", "\u1680\u1680x", "\u200a\u205f end",
          "\x1c\x1d\x1e\x1f separators", "tab\u000bvertical\u000cformfeed"]

# 3. numbers inside text, digit runs of every length
for k in range(1, 40):
    lines.append("".join(rng.choice("0123456789") for _ in range(k)))
for _ in range(120):
    n = rng.choice(numbers)
    lines.append(f"{sentence(rng.randint(1, 6))} {n}{rng.choice(['', '.', ',', '%', 'px', ' items'])} {sentence(rng.randint(0, 5))}")

# 4. contractions in all cases
contr = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "'x", "'"]
for _ in range(120):
    w = rng.choice(["it", "he", "they", "we", "I", "you", "IT", "She", "don", "won", "o", "rock"])
    lines.append(f"{w}{rng.choice(contr)} {sentence(rng.randint(1, 5))}{rng.choice(contr)}")

# 5. mixed-script sentences with random spacing and punctuation
punct = [".", ",", "!", "?", ";", ":", "...", "—", "–", "-", "(", ")", "\"", "'", "«", "»", "“", "”", "、", "。", "،", "؟", "।"]
for _ in range(700):
    parts = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.55:
            parts.append(rng.choice(words))
        elif r < 0.65:
            parts.append(rng.choice(numbers))
        elif r < 0.80:
            parts.append(rng.choice(punct))
        elif r < 0.88:
            parts.append(rng.choice(["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️", "🧑🏿‍🚀", "✔", "☃", "𝔘𝔫𝔦", "🤷‍♀️"]))
        elif r < 0.94:
            ws = rng.choice(prose).split(" "); parts.append(ws[rng.randrange(len(ws))])
        else:
            parts.append(rng.choice(["<|im_end|>", "<|endoftext|>", "<think>", "<|eot_id|>", "<|im_start|>"]))
    sep = [rng.choice(ws_variants) if rng.random() < 0.25 else " " for _ in parts]
    lines.append("".join(p + s for p, s in zip(parts, sep)).rstrip(" ") if rng.random() < 0.7 else "".join(p + s for p, s in zip(parts, sep)))

# 6. code-like lines generated from tokens
ident = ["x", "y", "idx", "buf_len", "CamelCase", "snake_case_name", "__init__", "$var", "@decorator", "i18n", "utf8", "n_vocab"]
ops = [" = ", " == ", " != ", " += ", "->", "::", ".", ", ", "(", ")", "[", "]", "{", "}", " && ", " || ", "<<", ">>", "**", "//", "/*", "*/", ";"]
for _ in range(400):
    s = rng.choice(["", "    ", "\t", "        ", "\t\t"])
    for _ in range(rng.randint(2, 14)):
        s += rng.choice(ident) if rng.random() < 0.5 else rng.choice(ops)
    lines.append(s)

# 7. CJK / Thai / Arabic / Devanagari runs without spaces, mixed with ASCII
runs = ["这是一个没有空格的长句子我们需要看分词器怎么处理", "日本語の文章には単語の間に空白がありません",
        "ภาษาไทยเขียนติดกันโดยไม่เว้นวรรคระหว่างคำ", "العربيةتكتبمناليمينإلىاليسار", "हिन्दीपाठबिनाअंतराल",
        "한국어는띄어쓰기를합니다만붙여쓰면", "ᄒᆞᆫ글옛글자"]
for _ in range(150):
    r = rng.choice(runs)
    a = rng.randrange(len(r))
    b = rng.randrange(a, len(r) + 1)
    lines.append(rng.choice(["", "abc", "123", " ", "(", "「"]) + r[a:b] + rng.choice(["", "xyz", "456", " ", ")", "」", "!"]))

# 8. URLs with random paths
for _ in range(100):
    path = "/".join(rng.choice(ident + words[:20]) for _ in range(rng.randint(1, 5)))
    lines.append(f"{rng.choice(['see', 'Visit', '→', ''])} https://{rng.choice(['example.com', 'hf.co', 'a.b.c.org', 'localhost:8000'])}/{path}?q={rng.randint(0, 99999)}")

# 9. long lines
lines.append("a" * 3000)
lines.append(" ".join(["supercalifragilisticexpialidocious"] * 80))
lines.append("9" * 2000)
lines.append(" " * 500 + "x" + "\t" * 300)
lines.append("".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(4000)) + "==")
lines.append("🙂" * 400)
lines.append("的" * 1500)
lines.append(("ab" * 50 + " ") * 30)

out = sys.argv[1] if len(sys.argv) > 1 else "corpus.txt"
for l in lines:
    assert "\n" not in l
with open(out, "w", encoding="utf-8", newline="\n") as f:
    for l in lines:
        f.write(l + "\n")
print(f"{len(lines)} lines -> {out}", file=sys.stderr)
