#!/usr/bin/env python3
"""Writes a C file defining `const char NAME[]` with the bytes of INPUT (build step)."""
import sys

name, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, 'rb').read()
with open(dst, 'w') as out:
    out.write('/* generated from %s by cli/embed.py */\n' % src.split('/')[-1])
    out.write('const char %s[] =\n' % name)
    for line in data.decode('utf-8').splitlines(True):
        esc = line.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
        out.write('    "%s"\n' % esc)
    out.write(';\n')
