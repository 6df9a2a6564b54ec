#!/usr/bin/env python3
"""One function's SASS from cuobjdump -sass output (by a substring of its name), with the
addresses, encodings and branch-target addresses normalised."""
import re, sys
path, key, out = sys.argv[1], sys.argv[2], sys.argv[3]
txt = open(path).read().split('\n')
start = [i for i, l in enumerate(txt) if l.strip().startswith('Function :') and key in l]
assert len(start) == 1, (len(start), key)
i = start[0] + 1
body = []
while i < len(txt) and not txt[i].strip().startswith('Function :') and not txt[i].startswith('\t\t...........'):
    l = txt[i]
    l = re.sub(r'/\*[0-9a-f]{4,}\*/', '', l)          # address
    l = re.sub(r'/\* 0x[0-9a-f]+ \*/', '', l)         # encoding
    l = l.strip()
    if l and not l.startswith('.'):
        body.append(l)
    i += 1
txt2 = '\n'.join(body)
txt2 = re.sub(r'`\(\.L_x_\d+\)', 'L', txt2)
open(out, 'w').write(txt2 + '\n')
print(key, len(body), 'instructions')
