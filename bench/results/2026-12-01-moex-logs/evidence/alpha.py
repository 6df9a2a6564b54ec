#!/usr/bin/env python3
"""Are two PTX bodies (registers as %r_N, labels canonical) the same up to one consistent
renaming of registers (a bijection for the whole function)? Adjacent moves from one source
(mov %a, %s; mov %b, %s) may come in either order: they are matched as a set, under the
bijection the other lines fix. Prints the text differences and the renamed registers."""
import re, sys
a = open(sys.argv[1]).read().split('\n')
b = open(sys.argv[2]).read().split('\n')
reg = re.compile(r'%(?:rd|rs|fd|hh|r|f|p|h|b)_\d+')
mov = re.compile(r'^\tmov\.\w+\s+(%\w+), (%\w+);$')
def ambiguous(lines):
    amb = set()
    for i in range(len(lines) - 1):
        m1, m2 = mov.match(lines[i]), mov.match(lines[i + 1])
        if m1 and m2 and m1.group(2) == m2.group(2):
            amb.update({i, i + 1})
    return amb
amb = ambiguous(a) | ambiguous(b)
fw, bw, diffs = {}, {}, []
if len(a) != len(b):
    print('line counts differ', len(a), len(b))
for i, (x, y) in enumerate(zip(a, b)):
    if reg.sub('R', x) != reg.sub('R', y):
        diffs.append((i + 1, x, y))
        continue
    if i in amb:
        continue
    for u, v in zip(reg.findall(x), reg.findall(y)):
        if fw.setdefault(u, v) != v or bw.setdefault(v, u) != u:
            diffs.append((i + 1, 'inconsistent ' + u + ' -> ' + v, y))
# the ambiguous runs: the set of (dst, src) under the bijection must match
i = 0
namb = 0
while i < len(a):
    if i in amb:
        j = i
        while j in amb: j += 1
        sa = {tuple(fw.get(r, '?' + r) for r in reg.findall(x)) for x in a[i:j]}
        sb = {tuple(reg.findall(y)) for y in b[i:j]}
        namb += 1
        if sa != sb:
            diffs.append((i + 1, 'move run differs', str(sorted(sa)) + ' vs ' + str(sorted(sb))))
        i = j
    else:
        i += 1
ren = {u: v for u, v in fw.items() if u != v}
print('lines', len(a), len(b), '| text differences', len(diffs), '| registers', len(fw), 'renamed', len(ren),
      '| unordered move runs', namb)
for d in diffs[:10]:
    print('  ', d)
print('   renamed (first 12):', sorted(ren.items())[:12])
