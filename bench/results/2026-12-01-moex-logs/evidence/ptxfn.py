#!/usr/bin/env python3
"""Extract one .entry's body from a PTX file (by substring of its name) and normalise:
the anonymous-namespace hash, the entry name, register numbers, labels."""
import re, sys
path, key, out = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(path).read().split('\n')
start = None
for i, l in enumerate(lines):
    if l.startswith('.entry') or l.startswith('.visible .entry'):
        if key in l:
            assert start is None, 'two entries match ' + key
            start = i
assert start is not None, 'no entry matches ' + key
# the body runs to the next top-level declaration (inline asm puts "}" lines at column 0 too)
end = start + 1
while end < len(lines) and not re.match(r'^(\.visible |\.weak |\.extern )?(\.entry|\.func|\.global|\.shared|\.const)\b', lines[end]):
    end += 1
body = lines[start:end]
while body and body[-1].strip() == '':
    body.pop()
name = re.search(r'entry (\S+)\(', body[0]).group(1)
txt = '\n'.join(body).replace(name, 'KERNEL')
txt = re.sub(r'_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+', 'ANON', txt)
# registers and labels renumbered by first appearance (same code, any numbering -> same text)
def canon(pat, fmt):
    global txt
    seen = {}
    def f(m):
        k = m.group(0)
        if k not in seen:
            seen[k] = fmt(m, len(seen))
        return seen[k]
    txt = re.sub(pat, f, txt)
# declarations (.reg .b32 %r<123>;) state counts: keep them, they differ only if the code does
if len(sys.argv) < 5: canon(r"%(rd|rs|fd|hh|r|f|p|h|b)(\d+)\b", lambda m, i: "%" + m.group(1) + "_" + str(i))
else: txt = re.sub(r"%(rd|rs|fd|hh|r|f|p|h|b)(\d+)\b", r"%\1_\2", txt)
canon(r'\$L__BB\d+_\d+', lambda m, i: '$L_' + str(i))
canon(r'\$L__tmp\d+', lambda m, i: '$T_' + str(i))
open(out, 'w').write(txt + '\n')
print(name, len(body), 'lines')
