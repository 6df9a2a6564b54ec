#!/usr/bin/env python3
"""Writes the tokenizer comparison corpus: >= 2 MB of text, one sample per line.

The corpus is generated, never committed (the project commits no third-party text). It
is deterministic for a given machine set-up and seed, and built from:

  * real multilingual strings: the translations in the iso-codes gettext catalogs under
    /usr/share/locale (country, subdivision, language, script and currency names in
    ~150 languages; scripts/setup.sh installs the iso-codes package);
  * real source code: Python standard-library modules of the running python3 and the C
    headers under /usr/include (the libc development headers);
  * seeded synthetic text: words drawn from the letters and combining marks of 20
    scripts, numbers in many notations and digit systems, emoji sequences (ZWJ joiners,
    skin-tone modifiers, regional-indicator and tag flags, keycaps, variation
    selectors), whitespace runs (spaces, tabs, NBSP, ideographic space, form feed, ...),
    CR and CRLF, JSON snippets, and lines that mix all of these;
  * special-token strings: the added tokens of the tokenizers given with --tokenizer
    (and DeepSeek's chat tokens), spliced into lines at random offsets, together with
    near misses (truncated, ASCII-bar, case-changed variants).

Lines are separated by "\\n" only; a line may contain "\\r" (CRLF line ends, lone CRs) and
other line-breaking characters (U+000B, U+000C, U+0085, U+2028, U+2029). The comparison
test (tests/tokenizer/corpus_test.cpp) also encodes runs of consecutive lines whole, so
"\\r\\n" and multi-line code reach the tokenizer too. When the system sources are missing
the synthetic part grows to reach --min-bytes; the script fails when fewer than
--min-scripts scripts have at least 2000 characters each.

  make_tokenizer_corpus.py --out FILE [--tokenizer tokenizer.json]... [--seed N]
                           [--min-bytes N] [--min-scripts N]
"""

import argparse
import glob
import gettext
import hashlib
import json
import os
import random
import sys
import sysconfig
import unicodedata

# (name, letter ranges, combining-mark ranges, word separator, punctuation). The ranges
# are inclusive; unassigned code points (category Cn in Python's Unicode data) are
# dropped. Scripts written without spaces use "".
SCRIPTS = [
    ("Han", [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF)], [], "", "。，、「」！？：；（）"),
    ("Hiragana", [(0x3041, 0x3096), (0x309D, 0x309F)], [(0x3099, 0x309A)], "", "。、ー「」"),
    ("Katakana", [(0x30A1, 0x30FA), (0x30FC, 0x30FF), (0xFF66, 0xFF9D), (0x31F0, 0x31FF)], [], "", "・。、"),
    ("Hangul", [(0xAC00, 0xD7A3), (0x3131, 0x318E)], [], " ", ".,?!"),
    ("Cyrillic", [(0x0410, 0x044F), (0x0400, 0x040F), (0x0450, 0x04FF)], [(0x0300, 0x0301)], " ", ".,;:!?—«»"),
    ("Greek", [(0x0391, 0x03A9), (0x03B1, 0x03C9), (0x1F00, 0x1FBC)], [(0x0301, 0x0301), (0x0342, 0x0345)], " ",
     ".,·;"),
    ("Arabic", [(0x0621, 0x064A), (0x0671, 0x06D3)], [(0x064B, 0x0652), (0x0670, 0x0670)], " ", "،؛؟.!"),
    ("Hebrew", [(0x05D0, 0x05EA)], [(0x05B0, 0x05BC), (0x05C1, 0x05C2)], " ", ".,־׃"),
    ("Devanagari", [(0x0905, 0x0939), (0x0958, 0x0961)], [(0x093E, 0x094D), (0x0901, 0x0903)], " ", "।॥,"),
    ("Bengali", [(0x0985, 0x09B9)], [(0x09BE, 0x09CD), (0x0981, 0x0983)], " ", "।,"),
    ("Tamil", [(0x0B85, 0x0BB9)], [(0x0BBE, 0x0BCD), (0x0B82, 0x0B83)], " ", ".,"),
    ("Thai", [(0x0E01, 0x0E2E), (0x0E40, 0x0E44)], [(0x0E31, 0x0E31), (0x0E34, 0x0E3A), (0x0E47, 0x0E4E)], "",
     " ฯๆ"),
    ("Georgian", [(0x10D0, 0x10FA)], [], " ", ".,!?"),
    ("Armenian", [(0x0531, 0x0556), (0x0561, 0x0587)], [], " ", "։,՝՞"),
    ("Ethiopic", [(0x1200, 0x135A)], [(0x135D, 0x135F)], " ", "።፣፤"),
    ("Khmer", [(0x1780, 0x17B3)], [(0x17B6, 0x17D3)], "", "។៕"),
    ("Sinhala", [(0x0D85, 0x0DC6)], [(0x0DCF, 0x0DDF), (0x0DCA, 0x0DCA)], " ", ".,"),
    ("Myanmar", [(0x1000, 0x102A)], [(0x102B, 0x103E)], " ", "၊။"),
    ("Latin", [(0x0041, 0x005A), (0x0061, 0x007A), (0x00C0, 0x024F), (0x1E00, 0x1EFF)], [(0x0300, 0x036F)], " ",
     ".,;:!?'\"()-"),
    ("Symbols", [(0x2190, 0x21FF), (0x2200, 0x22FF), (0x2500, 0x257F), (0xFF01, 0xFF5E), (0x2460, 0x24FF),
                 (0x1D400, 0x1D7FF)], [], " ", ""),
]

ZWJ, VS16, VS15, KEYCAP = "\u200d", "\ufe0f", "\ufe0e", "\u20e3"
SKIN_TONES = [chr(c) for c in range(0x1F3FB, 0x1F400)]
PEOPLE = ["\U0001F468", "\U0001F469", "\U0001F9D1", "\U0001F467", "\U0001F466", "\U0001F476", "\U0001F474",
          "\U0001F475"]
HANDS = ["\U0001F44B", "\U0001F44D", "\U0001F44E", "\U0001F44F", "\U0001F64C", "\u270C", "\u261D", "\U0001F91E",
         "\U0001F590", "\U0001F4AA"]
OBJECTS = ["\U0001F4BB", "\U0001F680", "\U0001F52C", "\U0001F3A8", "\U0001F373", "\U0001F692", "\u2695" + VS16,
           "\u2696" + VS16, "\u2708" + VS16, "\U0001F33E", "\U0001F3EB", "\U0001F527", "\U0001F9AF"]
MISC_EMOJI = ["\U0001F600", "\U0001F602", "\U0001F923", "\U0001F60D", "\U0001F914", "\U0001F525", "\u2728",
              "\u2764" + VS16, "\U0001F308", "\U0001F389", "\U0001F9E0", "\U0001FAE0", "\U0001F44D\U0001F3FD",
              "\u263A" + VS15, "\u263A" + VS16, "\u00A9" + VS16, "\U0001F3F3" + VS16 + ZWJ + "\U0001F308",
              "\U0001F3F4" + ZWJ + "\u2620" + VS16, "\U0001F415" + ZWJ + "\U0001F9BA",
              "\U0001F441" + VS16 + ZWJ + "\U0001F5E8" + VS16, "\U0001F469" + ZWJ + "\u2764" + VS16 + ZWJ +
              "\U0001F48B" + ZWJ + "\U0001F468", "\U0001F9D1\U0001F3FB" + ZWJ + "\U0001F91D" + ZWJ +
              "\U0001F9D1\U0001F3FF"]
COUNTRIES = ["US", "GB", "JP", "CN", "KR", "IN", "DE", "FR", "BR", "RU", "UA", "IL", "SA", "EG", "TH", "GE", "AM",
             "ET", "NP", "BD", "LK", "GR", "ZA", "MX", "CA", "AU", "NG", "EU", "UN"]
TAG_FLAGS = ["gbeng", "gbsct", "gbwls", "usca", "ustx"]
WHITESPACE = [" ", " ", " ", "\t", "\u00a0", "\u3000", "\u2009", "\u202f", "\u2003", "\x0b", "\x0c", "\x85",
              "\u2028", "\u2029", "\u200b", "\ufeff", "\r"]
DIGIT_ZEROS = [0x30, 0x660, 0x6F0, 0x966, 0x9E6, 0xBE6, 0xE50, 0x1040, 0xFF10, 0x1D7CE]
# DeepSeek's chat and tool tokens (MODEL_V41.md §10), used even when no tokenizer is given.
CHAT_TOKENS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>",
               "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
               "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "｜DSML｜", "<｜System｜>", "<｜▁pad▁｜>"]
ISO_DOMAINS = ["iso_3166-1", "iso_3166-2", "iso_3166-3", "iso_639-2", "iso_639-3", "iso_639-5", "iso_15924",
               "iso_4217"]


def assigned(ranges):
    out = []
    for lo, hi in ranges:
        out.extend(chr(c) for c in range(lo, hi + 1) if unicodedata.category(chr(c)) != "Cn")
    return out


class Synth:
    def __init__(self, rng):
        self.rng = rng
        self.scripts = [(name, assigned(letters), assigned(marks), sep, punct)
                        for name, letters, marks, sep, punct in SCRIPTS]

    def word(self, letters, marks):
        r = self.rng
        out = []
        for _ in range(r.choice([1, 2, 2, 3, 3, 4, 4, 5, 6, 7, 9, 12])):
            out.append(r.choice(letters))
            if marks and r.random() < 0.35:
                out.append(r.choice(marks))
                if r.random() < 0.1:
                    out.append(r.choice(marks))  # stacked marks
        return "".join(out)

    def sentence(self, script=None):
        r = self.rng
        name, letters, marks, sep, punct = script or r.choice(self.scripts)
        words = [self.word(letters, marks) for _ in range(r.randint(2, 18))]
        if sep:
            text = ""
            for i, w in enumerate(words):
                text += w
                if punct and r.random() < 0.12:
                    text += r.choice(punct)
                if i + 1 < len(words):
                    text += sep if r.random() < 0.93 else r.choice(["  ", " - ", ", ", sep * 3])
        else:
            text = "".join(w + (r.choice(punct) if punct and r.random() < 0.2 else "") for w in words)
        if name == "Latin" and r.random() < 0.3:
            text = unicodedata.normalize(r.choice(["NFC", "NFD", "NFKD"]), text)
        return text

    def number(self):
        r = self.rng
        k = r.randrange(22)
        n = r.randint(0, 10 ** r.randint(1, 19))
        if k == 0:
            return str(n)
        if k == 1:
            return f"{-n:,}"
        if k == 2:
            return f"{n:,}".replace(",", r.choice([".", " ", "\u202f", "'", "\u00a0"]))
        if k == 3:
            return f"{r.uniform(-1e6, 1e6):.{r.randint(0, 9)}f}"
        if k == 4:
            return f"{r.uniform(-1, 1) * 10 ** r.randint(-30, 30):.{r.randint(1, 6)}e}"
        if k == 5:
            return r.choice(["0x", "0X", "#", "U+", "\\x", "0o", "0b"]) + format(n, r.choice(["x", "X", "o", "b"]))
        if k == 6:
            return f"{r.randint(1900, 2100)}-{r.randint(1, 12):02d}-{r.randint(1, 31):02d}" + r.choice(
                ["", f"T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z",
                 f" {r.randint(0, 23)}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999999)}"])
        if k == 7:
            return f"{r.randint(1, 31)}/{r.randint(1, 12)}/{r.randint(0, 99):02d}"
        if k == 8:
            return ".".join(str(r.randint(0, 255)) for _ in range(4)) + r.choice(["", f":{r.randint(1, 65535)}"])
        if k == 9:
            return f"+{r.randint(1, 999)} ({r.randint(100, 999)}) {r.randint(100, 999)}-{r.randint(0, 9999):04d}"
        if k == 10:
            return r.choice(["$", "€", "£", "¥", "₹", "₩", "₽", "₪", "฿", "USD ", ""]) + f"{r.uniform(0, 1e7):,.2f}" + \
                r.choice(["", " €", "%", "‰", " kg", "km/h", "°C", "×10⁸"])
        if k == 11:  # other decimal digit systems
            zero = r.choice(DIGIT_ZEROS)
            return "".join(chr(zero + int(d)) for d in str(n))
        if k == 12:
            return "v" + ".".join(str(r.randint(0, 40)) for _ in range(r.randint(2, 4))) + r.choice(
                ["", "-rc.1", "-beta+exp.sha.5114f85", "a2", ".post1"])
        if k == 13:
            return r.choice(["½", "¾", "⅓", "⅞", "²", "³", "¹⁰", "₂", "Ⅻ", "Ⅳ", "ⅷ", "①", "⑳", "㉑", "〇", "一二三",
                             "四十二", "٪", "٫"]) + str(r.randint(0, 99))
        if k == 14:  # long digit runs exercise the 1-3 digit splitting
            return "".join(r.choice("0123456789") for _ in range(r.randint(4, 60)))
        if k == 15:
            return f"{r.randint(0, 99)}{r.choice(['st', 'nd', 'rd', 'th', 'px', 'em', 'GB', 'ms', 'x', '%'])}"
        if k == 16:
            return f"{r.randint(1, 9999)}{r.choice(['年', '月', '日', '个', '번', '회', 'ヶ月', ' ล้าน'])}"
        if k == 17:
            return " ".join(str(r.randint(0, 10 ** r.randint(1, 5))) for _ in range(r.randint(2, 8)))
        if k == 18:
            return f"{r.randint(-99, 99)}{r.choice(['+', '-', '*', '/', '^', '=', '<=', '!='])}{r.randint(0, 999)}"
        if k == 19:
            return f"{r.random():.17g}"
        if k == 20:
            return r.choice(["1e10", "-0.0", "NaN", "inf", "1_000_000", "0777", "00042", "3.14159265358979323846"])
        return f"({r.randint(0, 999)}){r.randint(0, 9)}.{r.randint(0, 99)}[{n}]"

    def emoji(self):
        r = self.rng
        k = r.randrange(9)
        tone = r.choice(SKIN_TONES) if r.random() < 0.6 else ""
        if k == 0:  # family
            return ZWJ.join(r.choice(PEOPLE) + (r.choice(SKIN_TONES) if r.random() < 0.2 else "")
                            for _ in range(r.randint(2, 4)))
        if k == 1:  # profession with tone
            return r.choice(PEOPLE[:3]) + tone + ZWJ + r.choice(OBJECTS)
        if k == 2:
            return r.choice(HANDS) + tone
        if k == 3:
            cc = r.choice(COUNTRIES) if r.random() < 0.85 else chr(r.randint(65, 90)) + chr(r.randint(65, 90))
            return "".join(chr(0x1F1E6 + ord(c) - 65) for c in cc)
        if k == 4:
            return "\U0001F3F4" + "".join(chr(0xE0000 + ord(c)) for c in r.choice(TAG_FLAGS)) + "\U000E007F"
        if k == 5:
            return r.choice("0123456789#*") + r.choice([VS16 + KEYCAP, KEYCAP])
        if k == 6:
            return r.choice(MISC_EMOJI)
        if k == 7:  # a broken sequence: dangling joiner or lone modifier
            return r.choice([ZWJ, tone or SKIN_TONES[0], VS16, chr(0x1F1E6 + r.randrange(26))]) + r.choice(MISC_EMOJI)
        return "".join(self.emoji() for _ in range(r.randint(2, 5)))

    def whitespace(self):
        r = self.rng
        return "".join(r.choice(WHITESPACE) for _ in range(r.choice([1, 1, 2, 3, 4, 8, 17, 40])))

    def json_snippet(self):
        r = self.rng
        obj = {self.word("abcdefghijklmnopqrstuvwxyz_", []): r.choice(
            [self.number(), r.randint(-10 ** 9, 10 ** 9), r.random(), None, True, self.sentence(), [1, 2, 3],
             {"k": self.emoji()}]) for _ in range(r.randint(1, 5))}
        return json.dumps(obj, ensure_ascii=r.random() < 0.3, indent=r.choice([None, None, 1, "\t"]))

    def mixed_line(self):
        r = self.rng
        parts = []
        for _ in range(r.randint(2, 9)):
            k = r.randrange(6)
            parts.append([self.sentence, self.number, self.emoji, self.whitespace, self.json_snippet,
                          lambda: self.sentence(self.scripts[-2])][k]())
        glue = r.choice(["", " ", " ", "\t", ": ", "\u3000"])
        return glue.join(parts)

    def whitespace_line(self):
        r = self.rng
        k = r.randrange(5)
        if k == 0:
            return self.whitespace()
        if k == 1:
            return self.whitespace() + self.sentence() + self.whitespace()
        if k == 2:  # indentation-style runs as in code and prose
            return r.choice(["    ", "\t", "\t\t", "  \t ", "        "]) * r.randint(1, 4) + self.sentence() + \
                r.choice(["", "\r", " \r", "\t"])
        if k == 3:
            return (self.sentence() + r.choice(["\r", "\r\r", " \r ", "\t\r"])) * r.randint(1, 3)
        return r.choice([" ", "\t", "  "]).join(self.number() for _ in range(r.randint(2, 6)))


def iso_code_lines(rng, limit):
    """Joins each catalog's translations into lines of a few entries; locales are visited
    round-robin so every language is represented before `limit` bytes are reached."""
    per_locale = []
    for locale_dir in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES")):
        texts = []
        for domain in ISO_DOMAINS:
            path = os.path.join(locale_dir, domain + ".mo")
            if not os.path.exists(path):
                continue
            try:
                with open(path, "rb") as f:
                    catalog = gettext.GNUTranslations(f)._catalog
            except (OSError, ValueError) as e:
                print(f"make_tokenizer_corpus: skipping {path}: {e}", file=sys.stderr)
                continue
            for key in sorted(k for k in catalog if isinstance(k, str) and k):
                value = catalog[key]
                if isinstance(value, str) and value and "\n" not in value and value != key:
                    texts.append(value if rng.random() < 0.85 else f"{key} = {value}")
        if texts:
            per_locale.append(texts)
    lines, size, pos = [], 0, [0] * len(per_locale)
    while size < limit and any(p < len(t) for p, t in zip(pos, per_locale)):
        for i, texts in enumerate(per_locale):
            if pos[i] >= len(texts) or size >= limit:
                continue
            n = rng.randint(1, 12)
            line = rng.choice([", ", "; ", " · ", " | ", "\t", " ", "، ", "、"]).join(texts[pos[i]:pos[i] + n])
            pos[i] += n
            lines.append(line)
            size += len(line.encode()) + 1
    return lines


def code_lines(rng, limit):
    files = []
    stdlib = sysconfig.get_paths()["stdlib"]
    files += sorted(glob.glob(os.path.join(stdlib, "*.py")))
    files += sorted(glob.glob("/usr/include/*.h"))
    rng.shuffle(files)
    lines, size = [], 0
    for path in files:
        if size >= limit:
            break
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        text = text[:rng.randint(2000, 40000)]
        k = rng.randrange(4)
        if k == 0:  # tab-indented, as in Go, C and Makefiles
            text = "\n".join(("\t" * ((len(l) - len(l.lstrip(" "))) // 4)) + l.lstrip(" ") for l in text.split("\n"))
        elif k == 1:  # Windows line ends
            text = text.replace("\n", "\r\n")
        for line in text.split("\n"):
            lines.append(line)
            size += len(line.encode()) + 1
    return lines


def added_tokens(paths, rng):
    tokens = list(CHAT_TOKENS)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            listed = [t["content"] for t in json.load(f).get("added_tokens", [])]
        # Keep a sample of numbered place-holder tokens so they don't drown the rest.
        holders = [t for t in listed if "place" in t and "holder" in t]
        tokens += [t for t in listed if t not in holders] + rng.sample(holders, min(len(holders), 24))
    unique = []
    for t in tokens:
        if t and t not in unique and "\n" not in t:
            unique.append(t)
    return unique


def near_miss(token, rng):
    k = rng.randrange(6)
    if k == 0 and len(token) > 1:
        return token[:-1]
    if k == 1 and len(token) > 1:
        return token[1:]
    if k == 2:
        return token.replace("｜", "|").replace("▁", "_")
    if k == 3:
        return token.swapcase()
    if k == 4:
        i = rng.randint(0, len(token))
        return token[:i] + " " + token[i:]
    return token + token[:rng.randint(0, len(token))]


def splice_tokens(lines, tokens, rng, fraction):
    for i in range(len(lines)):
        if rng.random() >= fraction:
            continue
        line = lines[i]
        for _ in range(rng.choice([1, 1, 1, 2, 3, 6])):
            tok = rng.choice(tokens)
            if rng.random() < 0.2:
                tok = near_miss(tok, rng)
            tok = rng.choice(["", "", " ", "\t", "  "]) + tok + rng.choice(["", "", " ", "\r", "  "])
            if rng.random() < 0.1:
                tok = tok * 2
            at = rng.randint(0, len(line))
            line = line[:at] + tok + line[at:]
        lines[i] = line


def script_counts(text):
    counts = {}
    for name, letters, marks, _, _ in SCRIPTS:
        if name in ("Latin", "Symbols"):
            continue
        chars = set(assigned(letters))
        counts[name] = sum(1 for c in text if c in chars)
    return counts


def build(tokenizer_paths, seed, min_bytes):
    rng = random.Random(seed)
    synth = Synth(rng)
    sections = {
        "iso-codes translations": iso_code_lines(rng, int(min_bytes * 0.42)),
        "source code": code_lines(rng, int(min_bytes * 0.22)),
    }
    generators = [
        ("script sentences", lambda: synth.sentence()),
        ("numbers", lambda: " ".join(synth.number() for _ in range(rng.randint(1, 12)))),
        ("emoji", lambda: "".join(rng.choice([synth.emoji(), synth.emoji(), " ", synth.sentence()[:30]])
                                  for _ in range(rng.randint(1, 10)))),
        ("whitespace and CR", synth.whitespace_line),
        ("json", lambda: synth.json_snippet().replace("\n", rng.choice(["\n", "\r\n"]))),
        ("mixed", synth.mixed_line),
    ]
    weights = [0.45, 0.12, 0.12, 0.12, 0.07, 0.12]
    have = sum(len(l.encode()) + 1 for ls in sections.values() for l in ls)
    target = max(min_bytes - have, int(min_bytes * 0.36)) + min_bytes // 50
    for (name, gen), weight in zip(generators, weights):
        lines, size = [], 0
        while size < target * weight:
            for line in gen().split("\n"):
                lines.append(line)
                size += len(line.encode()) + 1
        sections[name] = lines
    tokens = added_tokens(tokenizer_paths, rng)
    # Interleave the sections in chunks of consecutive lines, so the multi-line samples
    # (runs of lines encoded whole) cross from one kind of text to another.
    chunks = []
    for name, lines in sections.items():
        splice_tokens(lines, tokens, rng, 0.08)
        i = 0
        while i < len(lines):
            n = rng.randint(5, 60)
            chunks.append(lines[i:i + n])
            i += n
    rng.shuffle(chunks)
    return [line for chunk in chunks for line in chunk], {k: len(v) for k, v in sections.items()}, tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", action="append", default=[], help="splice this tokenizer.json's added tokens")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--min-bytes", type=int, default=2_200_000)
    ap.add_argument("--min-scripts", type=int, default=10)
    args = ap.parse_args()
    lines, sections, tokens = build(args.tokenizer, args.seed, args.min_bytes)
    text = "\n".join(lines) + "\n"
    data = text.encode("utf-8")
    if len(data) < args.min_bytes:
        sys.exit(f"make_tokenizer_corpus: only {len(data)} bytes (< {args.min_bytes})")
    counts = script_counts(text)
    covered = sorted(name for name, n in counts.items() if n >= 2000)
    if len(covered) < args.min_scripts:
        sys.exit(f"make_tokenizer_corpus: only {len(covered)} scripts with >= 2000 characters: {counts}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".part", "wb") as f:
        f.write(data)
    os.replace(args.out + ".part", args.out)
    print(json.dumps({"out": args.out, "bytes": len(data), "lines": len(lines), "sha256": hashlib.sha256(data).hexdigest(),
                      "sections_lines": sections, "special_strings": len(tokens), "script_chars": counts},
                     ensure_ascii=False))


if __name__ == "__main__":
    main()
